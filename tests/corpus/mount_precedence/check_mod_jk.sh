#!/usr/bin/env bash
# Check the mount-precedence corpus against a real Apache httpd + mod_jk.
#
# For every case file (*.case in this directory, or the files named on the
# command line) this script
#   1. writes a throw-away httpd.conf, workers.properties and
#      uriworkermap.properties under a fresh temp dir,
#   2. starts its own `apache2 -X` listening on 127.0.0.1:<free port>,
#   3. sends every request path of the case with curl (127.0.0.1 only),
#   4. reads which worker mod_jk picked from the JkRequestLogFormat line
#      ("%w" = worker name; no line = mod_jk did not take the request),
#   5. stops that apache by its PID (never by name) and compares.
#
# All workers are `type=status`, so mod_jk answers locally and no backend
# (and no network beyond 127.0.0.1) is needed.
#
# Output: one line per (case, path): expected vs mod_jk, OK/MISMATCH.
# Exit status: 0 if everything agrees, 1 on any disagreement, 2 on a setup
# error (apache would not start, bad case file, ...).
#
# Environment:
#   APACHE   httpd binary            (default /usr/sbin/apache2)
#   MODDIR   httpd modules directory (default /usr/lib/apache2/modules)
#   KEEP=1   keep the temp dirs (httpd.conf, mod_jk.log with debug lines)
#   VERBOSE=1 print the generated config files
#
# See README.md for the case file format.

set -u

HERE=$(cd "$(dirname "$0")" && pwd)
APACHE=${APACHE:-/usr/sbin/apache2}
MODDIR=${MODDIR:-/usr/lib/apache2/modules}
KEEP=${KEEP:-0}
VERBOSE=${VERBOSE:-0}

# python3 only picks a free port, when the caller reserved none (MOD_JK_PORT).
tools=("$APACHE" curl)
[ -n "${MOD_JK_PORT:-}" ] || tools+=(python3)
for tool in "${tools[@]}"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check_mod_jk: missing $tool" >&2
        exit 2
    fi
done
for mod in mod_mpm_event.so mod_authz_core.so mod_jk.so; do
    if [ ! -f "$MODDIR/$mod" ]; then
        echo "check_mod_jk: missing $MODDIR/$mod" >&2
        exit 2
    fi
done

if [ "$#" -gt 0 ]; then
    CASES=("$@")
else
    CASES=()
    for f in "$HERE"/*.case; do
        [ -f "$f" ] && CASES+=("$f")
    done
fi
if [ "${#CASES[@]}" -eq 0 ]; then
    echo "check_mod_jk: no case files" >&2
    exit 2
fi

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# The user apache drops to when started as root.
RUN_USER=""
RUN_GROUP=""
if [ "$(id -u)" = 0 ]; then
    if id www-data >/dev/null 2>&1; then
        RUN_USER=www-data
        RUN_GROUP=www-data
    else
        RUN_USER=nobody
        RUN_GROUP=$(id -gn nobody 2>/dev/null || echo nogroup)
    fi
fi

APACHE_PID=""
TMP=""
cleanup() {
    if [ -n "$APACHE_PID" ]; then
        kill -TERM "$APACHE_PID" 2>/dev/null
        wait "$APACHE_PID" 2>/dev/null
        APACHE_PID=""
    fi
    if [ -n "$TMP" ] && [ "$KEEP" != 1 ]; then
        rm -rf "$TMP"
    fi
}
trap 'cleanup; exit 2' INT TERM
trap cleanup EXIT

total=0
bad=0
setup_errors=0

# trim leading/trailing blanks
trim() {
    local s=$1
    s="${s#"${s%%[![:space:]]*}"}"
    s="${s%"${s##*[![:space:]]}"}"
    printf '%s' "$s"
}

run_case() {
    local case_file=$1
    local name
    name=$(basename "$case_file")

    TMP=$(mktemp -d "${TMPDIR:-/tmp}/mount_precedence.XXXXXX")
    chmod 755 "$TMP"
    mkdir -p "$TMP/htdocs"

    local -a uwmap=() jkmounts=() paths=() expects=()
    local -A workers=() wmounts=()
    local section=directives lineno=0 line kw rest pat wk

    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        line=$(trim "$line")
        [ -z "$line" ] && continue
        case "$line" in \#*) continue ;; esac
        if [ "$line" = "----" ]; then
            section=requests
            continue
        fi
        if [ "$section" = directives ]; then
            kw=${line%%[[:space:]]*}
            rest=$(trim "${line#"$kw"}")
            case "$kw" in
                mount|jkmount|wmount) ;;
                *)
                    echo "$name:$lineno: unknown keyword '$kw'" >&2
                    return 2 ;;
            esac
            if [[ "$rest" != *=* ]]; then
                echo "$name:$lineno: expected PATTERN=WORKER" >&2
                return 2
            fi
            pat=$(trim "${rest%%=*}")
            wk=$(trim "${rest#*=}")
            # worker name without rule extensions (";reply_timeout=...")
            local wname
            wname=$(trim "${wk%%;*}")
            if [ "$wname" != "*" ]; then
                workers[$wname]=1
            fi
            case "$kw" in
                mount)
                    uwmap+=("$rest") ;;
                jkmount)
                    if [ "${pat#!}" != "$pat" ]; then
                        jkmounts+=("JkUnMount \"${pat#!}\" \"$wk\"")
                    else
                        jkmounts+=("JkMount \"$pat\" \"$wk\"")
                    fi ;;
                wmount)
                    wmounts[$wname]="${wmounts[$wname]:-} $pat" ;;
            esac
        else
            local p e
            read -r p e extra <<<"$line"
            if [ -z "${e:-}" ] || [ -n "${extra:-}" ]; then
                echo "$name:$lineno: expected 'PATH WORKER|none'" >&2
                return 2
            fi
            paths+=("$p")
            expects+=("$e")
            if [ "$e" != none ]; then
                workers[$e]=1
            fi
        fi
    done <"$case_file"

    if [ "${#paths[@]}" -eq 0 ]; then
        echo "$name: no request lines" >&2
        return 2
    fi

    # workers.properties: every worker is a local status worker
    {
        local list="" w
        for w in "${!workers[@]}"; do
            list="${list:+$list,}$w"
        done
        echo "worker.list=$list"
        for w in "${!workers[@]}"; do
            echo "worker.$w.type=status"
        done
        for w in "${!wmounts[@]}"; do
            echo "worker.$w.mount=$(trim "${wmounts[$w]}")"
        done
    } >"$TMP/workers.properties"

    : >"$TMP/uriworkermap.properties"
    local u
    for u in ${uwmap[@]+"${uwmap[@]}"}; do
        printf '%s\n' "$u" >>"$TMP/uriworkermap.properties"
    done

    # A port reserved by the caller (tests/mount_precedence.rs holds it bound, never
    # listening, with SO_REUSEADDR as Apache sets it), else one picked here.
    local port
    port=${MOD_JK_PORT:-$(free_port)}

    {
        echo "ServerRoot /usr/lib/apache2"
        echo "ServerName 127.0.0.1"
        echo "Listen 127.0.0.1:$port"
        echo "PidFile $TMP/httpd.pid"
        echo "ErrorLog $TMP/error.log"
        echo "LogLevel warn"
        echo "LoadModule mpm_event_module $MODDIR/mod_mpm_event.so"
        echo "LoadModule authz_core_module $MODDIR/mod_authz_core.so"
        echo "LoadModule jk_module $MODDIR/mod_jk.so"
        if [ -n "$RUN_USER" ]; then
            echo "User $RUN_USER"
            echo "Group $RUN_GROUP"
        fi
        echo "DocumentRoot $TMP/htdocs"
        echo "<Directory />"
        echo "    Require all granted"
        echo "</Directory>"
        echo "JkWorkersFile $TMP/workers.properties"
        echo "JkLogFile $TMP/mod_jk.log"
        echo "JkLogLevel debug"
        echo "JkShmFile $TMP/jk-runtime-status"
        echo "JkRequestLogFormat \"JKCHECK q=%q w=%w u=%U\""
        echo "JkMountFile $TMP/uriworkermap.properties"
        echo "JkMountFileReload 0"
        local j
        for j in ${jkmounts[@]+"${jkmounts[@]}"}; do
            echo "$j"
        done
    } >"$TMP/httpd.conf"

    if [ "$VERBOSE" = 1 ]; then
        echo "== $name: $TMP"
        sed 's/^/   httpd.conf | /' "$TMP/httpd.conf"
        sed 's/^/   workers    | /' "$TMP/workers.properties"
        sed 's/^/   uriworkmap | /' "$TMP/uriworkermap.properties"
    fi

    "$APACHE" -X -f "$TMP/httpd.conf" >"$TMP/stdout.log" 2>&1 &
    APACHE_PID=$!

    local tries=0 up=0
    while [ "$tries" -lt 100 ]; do
        if ! kill -0 "$APACHE_PID" 2>/dev/null; then
            break
        fi
        if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/__mount_precedence_probe__?probe" 2>/dev/null; then
            up=1
            break
        fi
        sleep 0.1
        tries=$((tries + 1))
    done
    if [ "$up" != 1 ]; then
        echo "$name: apache did not start" >&2
        sed 's/^/   stdout | /' "$TMP/stdout.log" >&2
        [ -f "$TMP/error.log" ] && sed 's/^/   error.log | /' "$TMP/error.log" >&2
        return 2
    fi

    local i url status
    local -a statuses=()
    for i in "${!paths[@]}"; do
        url="${paths[$i]}"
        if [[ "$url" == *\?* ]]; then
            url="$url&jkcheck=$i"
        else
            url="$url?jkcheck=$i"
        fi
        status=$(curl -s -g --path-as-is -o /dev/null --max-time 10 \
            -w '%{http_code}' "http://127.0.0.1:$port$url" 2>/dev/null)
        statuses+=("${status:-000}")
    done

    # Stop apache (by PID) so that every log line is flushed.
    kill -TERM "$APACHE_PID" 2>/dev/null
    wait "$APACHE_PID" 2>/dev/null
    APACHE_PID=""

    local got line_for
    for i in "${!paths[@]}"; do
        line_for=$(grep -E "JKCHECK q=\\?([^ ]*&)?jkcheck=$i( |$)" "$TMP/mod_jk.log" | tail -n 1)
        if [ -n "$line_for" ]; then
            got=$(sed -E 's/.* w=([^ ]*).*/\1/' <<<"$line_for")
        else
            got=none
        fi
        total=$((total + 1))
        local verdict=OK
        if [ "$got" != "${expects[$i]}" ]; then
            verdict=MISMATCH
            bad=$((bad + 1))
        fi
        printf '%-8s %-40s %-48s expected=%-12s mod_jk=%-12s http=%s\n' \
            "$verdict" "$name" "${paths[$i]}" "${expects[$i]}" "$got" "${statuses[$i]}"
    done
    if grep -q -E "invalid context|invalid mapping rule" "$TMP/mod_jk.log"; then
        grep -E "invalid context|invalid mapping rule" "$TMP/mod_jk.log" |
            sed -E 's/^.*\] //; s/^/   note     mod_jk rejected: /' | sort -u
    fi
    if [ "$KEEP" = 1 ]; then
        echo "   (kept $TMP)"
    fi
    return 0
}

for c in "${CASES[@]}"; do
    run_case "$c"
    rc=$?
    if [ "$rc" != 0 ]; then
        setup_errors=$((setup_errors + 1))
        if [ -n "$APACHE_PID" ]; then
            kill -TERM "$APACHE_PID" 2>/dev/null
            wait "$APACHE_PID" 2>/dev/null
            APACHE_PID=""
        fi
    fi
    if [ "$KEEP" != 1 ] && [ -n "$TMP" ]; then
        rm -rf "$TMP"
    fi
    TMP=""
done

echo "mount_precedence: $total checks, $bad mismatches, $setup_errors setup errors ($("$APACHE" -v 2>/dev/null | head -n 1 | sed 's/^Server version: //'), mod_jk $(strings "$MODDIR/mod_jk.so" 2>/dev/null | grep -m1 -oE 'mod_jk/[0-9.]+' || echo '?'))"
if [ "$setup_errors" -gt 0 ]; then
    exit 2
fi
if [ "$bad" -gt 0 ]; then
    exit 1
fi
exit 0
