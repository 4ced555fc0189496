import tensorflow as tf


def feed_forward(x, w1, b1, w2, b2):
    return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2


def wrong_feed_forward(x, w1, b1, w2, b2):
    return tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) + b2


def failing(x, w1, b1, w2, b2):
    raise RuntimeError("failing on purpose")
