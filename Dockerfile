# mkdocs-formula-check: serve or check a documentation project with verified formulas.
#
#   docker build -t formula-check .                          # CPU TensorFlow
#   docker build -t formula-check --build-arg EXTRA=gpu .    # CUDA TensorFlow
#   docker run --rm --init -v "$PWD:/docs" -p 8000:8000 formula-check   # serve on :8000
#   docker run --rm --init -v "$PWD:/docs" formula-check check          # CI: exit 1 on drift
#   docker run --rm --init -v "$PWD:/docs" -p 8000:8000 -p 8888:8888 formula-check serve+lab
#                                    # JupyterLab on :8888 next to mkdocs serve on :8000
#   (--init: a small init as PID 1 reaps any worker process that outlives its parent)
#
# On your team's own TensorFlow image (TensorFlow already there, so no extra installs it):
#   docker build -t formula-check --build-arg BASE=tensorflow/tensorflow:2.16.1-jupyter \
#       --build-arg EXTRA= .
# Behind a package mirror (pip reads these; none of them stays in the image's environment):
#   docker build -t formula-check --build-arg PIP_INDEX_URL=https://pypi.example.internal/simple .
# A mirror that needs credentials: give them as a build secret, never as a build argument
# (build arguments show in `docker history`):
#   docker build -t formula-check --secret id=pip.conf,src="$HOME/.config/pip/pip.conf" .
#
# No token is baked in: JupyterLab makes a fresh one per start and prints it, or takes yours
# from the environment at run time (-e JUPYTER_TOKEN, or JUPYTER_TOKEN_FILE on a mounted secret).
ARG BASE=python:3.11-slim
FROM ${BASE}

# cpu or gpu: the TensorFlow the image installs; empty where the base image has TensorFlow.
ARG EXTRA=cpu
# A package index or mirror: pip reads these from the environment of the install step alone.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NO_MKDOCS_2_WARNING=1 \
    FORMULA_CHECK_DOCS=/docs \
    JUPYTER_PORT=8888 \
    HOME=/home/docs

# A base image may end as its own user (Jupyter's images do): installing needs root (uid 0).
USER 0
# The home is open to any uid (sticky, like /tmp): with `docker run --user "$(id -u):$(id -g)"`
# JupyterLab, IPython and Matplotlib still find a home they can write to. A base image that
# already has a user or group 1000 (jovyan in Jupyter's images) keeps it: the image runs as
# uid 1000 either way.
RUN (getent group 1000 >/dev/null || groupadd --system --gid 1000 docs) \
    && (getent passwd 1000 >/dev/null || useradd --system --uid 1000 --gid 1000 --no-create-home docs) \
    && mkdir -p /home/docs \
    && chmod 1777 /home/docs

WORKDIR /opt/formula-check
COPY pyproject.toml README.md ./
COPY plugin ./plugin
# notebook: the %load_ext formula_check magic; JupyterLab and its Python kernel to run it in.
# `python3 -m pip`: some bases name no `pip` on the PATH. The pip.conf secret, where given,
# is read from /etc/pip.conf during this step alone and never written into a layer.
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf \
    python3 -m pip install --no-cache-dir "./[docs,notebook${EXTRA:+,${EXTRA}}]" \
        "jupyterlab>=4,<5" "ipykernel>=6"
COPY --chmod=0755 docker/entrypoint.sh docker/together.py /usr/local/lib/formula-check/
COPY docker/jupyter/jupyter_server_config.json /etc/jupyter/

USER 1000:1000
WORKDIR /docs
EXPOSE 8000 8888
# Asks whichever servers the container started (serve: MkDocs, lab: JupyterLab, serve+lab:
# both); a container that runs `check` or `build` has none to ask.
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 \
    CMD ["/usr/local/lib/formula-check/entrypoint.sh", "health"]
ENTRYPOINT ["/usr/local/lib/formula-check/entrypoint.sh"]
CMD ["serve"]
