"""The only part of the package that runs TensorFlow: worker processes and their protocol."""
