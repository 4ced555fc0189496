#!/bin/sh
# Entry point of the mkdocs-formula-check image.
#   serve (default)   mkdocs serve on 0.0.0.0:8000 (the checks run on every rebuild)
#   lab [ARGS...]     JupyterLab on 0.0.0.0:8888 ($JUPYTER_PORT), rooted at the project
#   serve+lab [SERVE ARGS...] [-- LAB ARGS...]
#                     both at once; when one of them ends, the other is stopped
#   build             mkdocs build --strict into $FORMULA_CHECK_DOCS/site
#   check [ARGS...]   formula-check check: exit 0 all verified, 1 drift, 2 bad usage
#   health            the HEALTHCHECK: every server this container started answers HTTP
#   anything else     run as given (e.g. "bash")
set -eu

docs="${FORMULA_CHECK_DOCS:-/docs}"
config="$docs/mkdocs.yml"
here="$(dirname -- "$0")"
# One file per running server, holding the URL that `health` asks. A container that only
# checks or builds writes none, so it is never reported unhealthy for a server it has not got.
health_dir="${TMPDIR:-/tmp}/formula-check-health"
mode="${1:-serve}"
[ "$#" -gt 0 ] && shift

need_config() {
    if [ ! -f "$config" ]; then
        echo "formula-check: no mkdocs.yml in $docs; mount your project there: docker run -v \"\$PWD:/docs\" ..." >&2
        exit 2
    fi
}

announce() {  # NAME URL
    if ! { mkdir -p "$health_dir" && printf '%s\n' "$2" >"$health_dir/$1"; } 2>/dev/null; then
        echo "formula-check: cannot write $health_dir; the health check will not see $1" >&2
    fi
}

case "$mode" in
    serve)
        need_config
        addr="${FORMULA_CHECK_ADDR:-0.0.0.0:8000}"
        announce mkdocs "http://127.0.0.1:${addr##*:}/"
        exec mkdocs serve --config-file "$config" --dev-addr "$addr" "$@"
        ;;
    lab)
        # The address, the port's fallback and the browser are set in Jupyter's own config
        # (/etc/jupyter/jupyter_server_config.json), not here: a flag given twice is an error
        # in Jupyter, so every one of them stays open to the caller's own flags.
        cd "$docs"
        announce jupyterlab "http://127.0.0.1:${JUPYTER_PORT:-8888}/api"
        exec jupyter lab "$@"
        ;;
    serve+lab)
        need_config
        exec python3 "$here/together.py" "$0" "$@"
        ;;
    build)
        need_config
        exec mkdocs build --strict --config-file "$config" "$@"
        ;;
    check)
        need_config
        exec formula-check check "$config" "$@"
        ;;
    health)
        for file in "$health_dir"/*; do
            [ -f "$file" ] || continue
            python3 -c '
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=4)
except urllib.error.HTTPError:
    pass  # an error page is an answer: the server is up
except OSError as error:
    sys.exit(f"formula-check: {sys.argv[1]} does not answer: {error}")
' "$(cat "$file")"
        done
        ;;
    *)
        exec "$mode" "$@"
        ;;
esac
