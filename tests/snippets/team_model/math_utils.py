"""Helpers the team's layers import (edits here must invalidate cached results)."""

import tensorflow as tf


def scale(logits, depth):
    return logits / tf.math.sqrt(tf.cast(depth, tf.float32))
