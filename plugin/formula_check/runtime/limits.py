"""How long the build waits for its workers, in seconds: one place for every limit the
pool, its workers and the zygote's client share."""

from __future__ import annotations

STARTUP_TIMEOUT = 120.0
"""A worker's or a zygote's hello (its TensorFlow import)."""
ANSWER_TIMEOUT = 60.0
"""The zygote's answer to a fork or a status: it takes milliseconds."""
EXIT_WAIT = 5.0
"""A worker seen ending is waited for, until the zygote can tell its exit status."""
CANCEL_GRACE = 5.0
"""A worker asked to cancel a check has this long to answer (``cancelled``, or that the
check runs on) before it is stopped."""
WORKER_GRACE = 5.0
"""Past a check's time limit, the pool waits this long for the worker to say it stopped the
check, before it stops the worker itself."""
POLL = 0.1
"""How often a wait for an answer looks at cancellation and memory."""
