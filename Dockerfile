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
# No token is baked in: JupyterLab makes a fresh one per start and prints it, or takes yours
# from the environment at run time (-e JUPYTER_TOKEN, or JUPYTER_TOKEN_FILE on a mounted secret).
FROM python:3.11-slim

ARG EXTRA=cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NO_MKDOCS_2_WARNING=1 \
    FORMULA_CHECK_DOCS=/docs \
    JUPYTER_PORT=8888 \
    HOME=/home/docs

# The home is open to any uid (sticky, like /tmp): with `docker run --user "$(id -u):$(id -g)"`
# JupyterLab, IPython and Matplotlib still find a home they can write to.
RUN groupadd --system --gid 1000 docs \
    && useradd --system --uid 1000 --gid docs --create-home --home-dir /home/docs docs \
    && chmod 1777 /home/docs

WORKDIR /opt/formula-check
COPY pyproject.toml README.md ./
COPY plugin ./plugin
# notebook: the %load_ext formula_check magic; JupyterLab and its Python kernel to run it in.
RUN pip install --no-cache-dir "./[${EXTRA},docs,notebook]" "jupyterlab>=4,<5" "ipykernel>=6"
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
