#!/bin/sh
# Entry point of the mkdocs-formula-check image.
#   serve (default)   mkdocs serve on 0.0.0.0:8000 (the checks run on every rebuild)
#   build             mkdocs build --strict into $FORMULA_CHECK_DOCS/site
#   check [ARGS...]   formula-check check: exit 0 all verified, 1 drift, 2 bad usage
#   anything else     run as given (e.g. "bash")
set -eu

docs="${FORMULA_CHECK_DOCS:-/docs}"
config="$docs/mkdocs.yml"
mode="${1:-serve}"
[ "$#" -gt 0 ] && shift

need_config() {
    if [ ! -f "$config" ]; then
        echo "formula-check: no mkdocs.yml in $docs; mount your project there: docker run -v \"\$PWD:/docs\" ..." >&2
        exit 2
    fi
}

case "$mode" in
    serve)
        need_config
        exec mkdocs serve --config-file "$config" --dev-addr "${FORMULA_CHECK_ADDR:-0.0.0.0:8000}" "$@"
        ;;
    build)
        need_config
        exec mkdocs build --strict --config-file "$config" "$@"
        ;;
    check)
        need_config
        exec formula-check check "$config" "$@"
        ;;
    *)
        exec "$mode" "$@"
        ;;
esac
