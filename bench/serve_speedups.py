"""Save -> page under ``mkdocs serve`` with and without the optional ``formula-check-serve``.

Two ``mkdocs serve`` processes of one site, one listing ``formula-check-serve`` after
``formula-check`` and one not, each on its own copy (its own warm cache, filled by one build
first). Each save edits a page's prose only and is timed from writing the file to the browser
having the edited page again (livereload answered, page fetched); the two servers take turns,
so load on the machine hits both alike. Prints the medians and each run.

    python /path/to/bench-anchors/gen.py --pages 10 --blocks 2 --out /tmp/w
    python bench/serve_speedups.py /tmp/w/ours --saves 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from site_speed import Server, builds_logged, edit_latency, next_build_time

PAGE = "page_01"
PROSE = "A TensorFlow implementation:"


def copy_site(site: Path, folder: Path, *, speedups: bool) -> Path:
    """``site`` copied to ``folder``, ``formula-check-serve`` listed or not; its mkdocs.yml."""
    shutil.copytree(site, folder, ignore=shutil.ignore_patterns("site"))
    config = folder / "mkdocs.yml"
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    plugins = [p for p in data.get("plugins", []) if p != "formula-check-serve"]
    data["plugins"] = [*plugins, "formula-check-serve"] if speedups else plugins
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(config)], cwd=folder, check=True
    )
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("site", type=Path, help="a generated site's folder (mkdocs.yml, docs/)")
    parser.add_argument("--saves", type=int, default=10)
    args = parser.parse_args()
    labels = ("with", "without")
    with tempfile.TemporaryDirectory(prefix="fc-serve-speedups-") as scratch:
        configs = {
            label: copy_site(args.site, Path(scratch) / label, speedups=label == "with")
            for label in labels
        }
        current = dict.fromkeys(labels, PROSE)
        saves: dict[str, list[float]] = {label: [] for label in labels}
        builds: dict[str, list[float]] = {label: [] for label in labels}
        servers: dict[str, Server] = {}
        try:
            for label in labels:
                log = Path(scratch) / f"{label}.log"
                servers[label] = Server(configs[label], dict(os.environ), log, dirty=False)
                servers[label].wait_until_served()
            for repeat in range(-1, args.saves):  # the first save is a warm-up
                for label in labels if repeat % 2 else labels[::-1]:
                    server, new = servers[label], f"{current[label]} save{repeat}"
                    page = configs[label].parent / "docs" / f"{PAGE}.md"
                    seen = len(builds_logged(server.log))
                    took = edit_latency(page, current[label], new, f"{server.url}{PAGE}/")
                    built = next_build_time(server.log, seen)
                    current[label] = new
                    if repeat >= 0:
                        saves[label].append(took)
                        builds[label].append(built)
        finally:
            for server in servers.values():
                server.stop()
    for label in labels:
        print(
            f"{label} formula-check-serve: save->page median "
            f"{statistics.median(saves[label]):.2f} s, MkDocs' build() median "
            f"{statistics.median(builds[label]):.2f} s"
        )
        print(f"  runs: {' '.join(f'{t:.2f}' for t in saves[label])}")
    fast, slow = (statistics.median(saves[label]) for label in labels)
    print(f"saved: {slow - fast:.2f} s, {100 * (slow - fast) / slow:.0f} % of save->page without")
    print(f"load average (1/5/15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
