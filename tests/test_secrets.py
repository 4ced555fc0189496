"""Nothing of the build's environment reaches the site unless the project asks for it by name:
a token that a snippet prints, or puts into its exception, is not there to print."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from formula_check.runtime.environment import settings_digest, worker_environment
from support import CONFINED, mkdocs_build

SECRET = "ghp_" + "Zq7" * 12  # looks like a token; made here, so it cannot be anywhere else
CONFIG = """\
site_name: Secrets
plugins:
  - search
  - formula-check:
      timing: false
      env: [FC_TEST_DATA_DIR]
markdown_extensions:
  - pymdownx.superfences
"""
FORMULA = r"\text{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}"
PAGE = f"""\
# Secrets

```formula id="prints-all" oracle="softmax"
{FORMULA}
```

```python
import os

import tensorflow as tf

print(dict(os.environ))
print(open("/proc/self/environ", "rb").read())


def softmax(x):
    return tf.nn.softmax(x)
```

```formula id="raises-it" oracle="softmax"
{FORMULA}
```

```python
import os


def softmax(x):
    raise ValueError("token: " + os.environ.get("FC_TEST_TOKEN", "not here"))
```

```formula id="asked-for" oracle="softmax"
{FORMULA}
```

```python
import os

import tensorflow as tf


def softmax(x):
    print("data in", os.environ["FC_TEST_DATA_DIR"])
    return tf.nn.softmax(x)
```
"""


READS_OTHERS = f"""
```formula id="reads-others" oracle="softmax"
{FORMULA}
```

```python
import os

import tensorflow as tf

# Every process older than this one, the build among them (/proc itself may not be listed)
for pid in range(1, os.getpid()):
    try:
        found = open(f"/proc/{{pid}}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    print("read", pid, [each for each in found if each.startswith(b"FC_TEST_TOKEN=")])
print("every older process asked")


def softmax(x):
    return tf.nn.softmax(x)
```
"""
"""A block that reads the environment of every process it can: the build's is out of its
reach where checks are confined (Landlock), or run as a user other than root (the build is
not dumpable). Root on a kernel that confines nothing can read it: see docs/isolation.md."""
BUILD_OUT_OF_REACH = CONFINED or os.geteuid() != 0


def everything_under(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


@pytest.mark.site
@pytest.mark.tf
def test_a_token_of_the_build_reaches_no_page_report_index_or_cache(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = PAGE + (READS_OTHERS if BUILD_OUT_OF_REACH else "")
    (tmp_path / "docs" / "index.md").write_text(page, encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(CONFIG, encoding="utf-8")
    env = dict(os.environ, FC_TEST_TOKEN=SECRET, FC_TEST_DATA_DIR="/data/shared-corpus")
    done = mkdocs_build(tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    site = everything_under(tmp_path / "site")
    cache = everything_under(tmp_path / ".cache")
    log = (done.stdout + done.stderr).encode()
    for name, content in [("site", site), ("cache", cache), ("log", log)]:
        assert SECRET.encode() not in content, f"the token reached the {name}"
    assert b"token: not here" in site, "the snippet that raised did not run"
    assert not BUILD_OUT_OF_REACH or b"every older process asked" in site, "it did not run"
    assert b"data in /data/shared-corpus" in site, "a variable asked for by name is missing"
    assert (tmp_path / "site" / "search" / "search_index.json").is_file()
    assert cache, "nothing was cached"


def test_the_worker_environment_keeps_what_tools_need_and_drops_the_rest() -> None:
    build = {
        "PATH": "/usr/bin",
        "HOME": "/home/someone",
        "LANG": "zh_CN.UTF-8",
        "LC_ALL": "zh_CN.UTF-8",
        "CUDA_VISIBLE_DEVICES": "0",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "TF_VAR_db_password": "hunter2",  # Terraform's, not TensorFlow's
        "TF_TOKEN_app_terraform_io": "s3cret",  # Terraform Cloud's token
        "NVIDIA_API_KEY": "nvapi-s3cret",  # not a setting of the GPU stack
        "GITHUB_TOKEN": "ghs_secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "WANDB_MODE": "offline",
    }
    env = worker_environment(["WANDB_MODE", "NOT_SET"], build)
    for kept in ("PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "WANDB_MODE"):
        assert env[kept] == build[kept]
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    dropped_names = ("TF_VAR_db_password", "TF_TOKEN_app_terraform_io", "NVIDIA_API_KEY")
    for dropped in (*dropped_names, "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "NOT_SET"):
        assert dropped not in env
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0" and env["PYTHONPATH"]


def test_the_values_of_passed_variables_key_the_cache_without_showing_them() -> None:
    one = settings_digest(["MY_DATA_DIR"], {"MY_DATA_DIR": "/a"})
    assert one != settings_digest(["MY_DATA_DIR"], {"MY_DATA_DIR": "/b"})
    assert one != settings_digest(["MY_DATA_DIR"], {})
    assert settings_digest(["MY_DATA_DIR"], {"MY_DATA_DIR": ""}) != settings_digest(
        ["MY_DATA_DIR"], {}
    )
    assert "/a" not in one and settings_digest([], {"MY_DATA_DIR": "/a"}) == ""
    # what TensorFlow reads keys results too; where things are does not
    assert settings_digest([], {"XLA_FLAGS": "--x"}) != settings_digest([], {})
    assert settings_digest([], {"TF_USE_LEGACY_KERAS": "1"}) != settings_digest([], {})
    assert settings_digest([], {"HOME": "/home/a", "PATH": "/a"}) == settings_digest([], {})
    assert settings_digest([], {"TF_CPP_MIN_LOG_LEVEL": "0"}) == settings_digest([], {})
