"""The MkDocs plugin's settings (``plugins: - formula-check: {...}`` in ``mkdocs.yml``)."""

from __future__ import annotations

from mkdocs.config import base
from mkdocs.config import config_options as c

from formula_check.planning.option_values import FORMULA_MODES
from formula_check.session.options import DEFAULTS, STATUSES, Options


# mkdocs' Config.__init_subclass__ is untyped; the ignore is for that call only.
class FormulaCheckConfig(base.Config):  # type: ignore[no-untyped-call]
    """Every option of the ``formula-check`` plugin."""

    enabled = c.Type(bool, default=True)
    """Check formulas at all. When off, nothing runs: each formula still renders as display
    math and its snippet as code, with no card, and the report page says checks were off
    (a fast preview, e.g. ``enabled: !ENV [FORMULA_CHECK, true]``)."""

    workers = c.Type(int, default=DEFAULTS.workers)
    """Worker processes running snippets in parallel; 0 (the default): one per core, at most
    4, where workers are forked from one TensorFlow import (Linux, `fork_workers`), else 1
    (each worker then imports TensorFlow itself: ~0.5 GB)."""

    timeout = c.Type((int, float), default=DEFAULTS.timeout)
    """Seconds a block's snippet may run before it is stopped (a block's ``timeout=`` wins)."""

    cache = c.Type(bool, default=DEFAULTS.cache)
    """Reuse results of checks whose spec, snippet and imported project files are unchanged."""

    cache_dir = c.Type(str, default=DEFAULTS.cache_dir)
    """Result cache folder, relative to the folder holding ``mkdocs.yml``."""

    fail_on = c.ListOfItems(
        c.Choice(STATUSES), default=sorted(DEFAULTS.fail_on, key=STATUSES.index)
    )
    """Statuses logged as warnings (so ``mkdocs build --strict`` fails); others are info."""

    oracles = c.ListOfItems(c.Type(str), default=[])
    """Your own oracles, as ``package.module:attr`` importable from the project folder."""

    language = c.Optional(c.Type(str))
    """Card language (``en``, ``zh``); default: the theme's ``language``. A page's own
    ``language:`` front matter wins for that page (a bilingual site)."""

    report = c.Type(bool, default=True)
    """Add a ``formula-check-report/`` page and a ``formula-check-report.json`` to the site.
    The page is generated: list it in ``nav`` as ``formula-check-report.md`` (with ``false``,
    take it out of ``nav`` too, or MkDocs reports a missing page). Left out of a ``nav``, it is
    a page outside the nav, which ``validation: nav: omitted_files`` does not report."""

    notebooks = c.Type(bool, default=False)
    """Offer each page with formula blocks as a Jupyter notebook: an "Open as notebook" link
    at its top, to a ``.ipynb`` written next to its HTML, with the page's prose and formulas
    as Markdown cells and each block's code in a ``%%formula`` cell that runs the same check.
    A page's ``formula_check_notebook: true`` or ``false`` front matter wins for that page.
    Needs nbformat (the ``notebook`` extra)."""

    timing = c.Type(bool, default=DEFAULTS.timing)
    """Time snippets (eager, ``tf.function``) and show it on the cards; off builds faster.
    Off wins over every block and page: no block is timed and no ``sweep=`` is run."""

    memory_limit_mb = c.Type(int, default=DEFAULTS.memory_limit_mb)
    """Resident-memory limit per worker in MiB (0: none). The parent polls the worker's RSS
    while a check runs and kills it past the limit; the block is reported as a crash."""

    fork_workers = c.Type(bool, default=DEFAULTS.fork_workers)
    """On Linux, fork workers from one process that has already imported TensorFlow: a second
    worker, or the fresh one replacing a worker stopped on a timeout, starts in milliseconds
    instead of importing TensorFlow again. Off: every worker is a new process."""

    fast_serve = c.Deprecated(
        message="The option '{}' no longer does anything: the speed-ups of mkdocs serve are the "
        "separate 'formula-check-serve' plugin (serve_speedups/ in the repository); remove it.",
        option_type=c.Type(bool),
    )
    """Deprecated: does nothing. An old ``mkdocs.yml`` that sets it still builds, with a note to
    remove it; the ``mkdocs serve`` speed-ups it turned on are the optional
    ``formula-check-serve`` plugin."""

    keep_alive = c.Type((int, float), default=DEFAULTS.keep_alive)
    """Seconds to keep the process that imported TensorFlow after a build ends (0: stop it
    with the build). Within that time, the next build, ``formula-check`` run or test session
    of this project forks its workers from it and skips the import. Linux, with
    ``fork_workers``."""

    env = c.ListOfItems(c.Type(str), default=[])
    """Variables of the build's environment the checks may read, by name (``[WANDB_MODE,
    MY_DATA_DIR]``). A check sees only these and what Python, TensorFlow, CUDA and the locale
    need (``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TF_*``, ``CUDA_*``...): a token or
    password of the build's never reaches a snippet, and so never its card. Their values are
    part of each result's cache key."""

    formula = c.Choice(FORMULA_MODES, default=DEFAULTS.formula)
    """How a block's formula is checked when its header and page do not say: ``on``
    (compiled and compared with the oracle; a formula outside what the compiler reads, such as
    an integral or math inside ``\\text``, leaves its block verified on its code alone, "formula
    not checked", counted in the build's summary and the report, while one read whose names or
    shapes do not fit fails its block), ``required`` (a block whose formula is not checked
    fails: a WARNING, so ``--strict`` fails the build), or ``off`` (only the code is
    checked)."""

    mathjax = c.Type(bool, default=True)
    """Bundle MathJax 3 (offline, from ``django-static-mathjax``); off if you load your own."""


def options_from(config: FormulaCheckConfig) -> Options:
    """The settings a validated plugin configuration holds."""
    return Options(
        workers=config.workers,
        timeout=float(config.timeout),
        cache=config.cache,
        cache_dir=config.cache_dir,
        fail_on=frozenset(config.fail_on),
        oracles=tuple(config.oracles),
        timing=config.timing,
        memory_limit_mb=config.memory_limit_mb,
        fork_workers=config.fork_workers,
        keep_alive=float(config.keep_alive),
        env=tuple(config.env),
        formula=config.formula,
    )


def out_of_range(config: FormulaCheckConfig) -> str:
    """What is wrong with the first number option outside its range, or an empty string."""
    return options_from(config).problem()
