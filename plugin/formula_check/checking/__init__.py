"""Judging a check's reply: the code against the oracle, the formula against the oracle (the
LaTeX compiled), the tolerance each is held to, and the notes a result carries. Pure NumPy,
in the build process; no module here starts a process or reads the cache."""
