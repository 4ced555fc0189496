# mkdocs-formula-check: serve or check a documentation project with verified formulas.
#
#   docker build -t formula-check .                          # CPU TensorFlow
#   docker build -t formula-check --build-arg EXTRA=gpu .    # CUDA TensorFlow
#   docker run --rm --init -v "$PWD:/docs" -p 8000:8000 formula-check   # serve on :8000
#   docker run --rm --init -v "$PWD:/docs" formula-check check          # CI: exit 1 on drift
#   (--init: a small init as PID 1 reaps any worker process that outlives its parent)
FROM python:3.11-slim

ARG EXTRA=cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NO_MKDOCS_2_WARNING=1 \
    FORMULA_CHECK_DOCS=/docs

RUN groupadd --system --gid 1000 docs \
    && useradd --system --uid 1000 --gid docs --create-home --home-dir /home/docs docs

WORKDIR /opt/formula-check
COPY pyproject.toml README.md ./
COPY plugin ./plugin
RUN pip install --no-cache-dir "./[${EXTRA},docs]"
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/formula-check-entrypoint

USER 1000:1000
WORKDIR /docs
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/', timeout=4)"]
ENTRYPOINT ["formula-check-entrypoint"]
CMD ["serve"]
