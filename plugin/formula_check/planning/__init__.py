"""From a block's options to the plan of its check: the option values and presets, the masks,
the inputs and calls the code is given, the regimes, timings and the request a check process
receives."""
