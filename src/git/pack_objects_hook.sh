# git's `uploadpack.packObjectsHook` (src/git/http.ts): upload-pack runs `sh <this file> git
# pack-objects ...` instead of pack-objects, so identical fetches share one pack, as Gitaly's
# pack-objects cache does. POSIX sh and coreutils only: it starts for every fetch, and a shell
# costs a few milliseconds where a Node.js process costs fifty.
#
# The key is a SHA-256 of the repository's real path, pack-objects' arguments and its standard
# input (the request's wants, haves, shallow and deepen lines). Under $CAIRN_PACK_CACHE_DIR:
#   <k0k1>/<key>.pack   a finished pack, sent again while younger than $CAIRN_PACK_CACHE_MAX_AGE s;
#   <k0k1>/<key>.lock/  held by the one process writing it (mkdir is atomic, across processes);
#                       `pid` in it names the pack-objects writing;
#   <k0k1>/<key>.tmp    the pack being written, at disk speed whatever the clients' speed. Every
#                       client, the writer's own too, follows it as it grows (tail --pid) and reads
#                       the rest after pack-objects has exited.
# A writer killed on the way leaves a lock naming a dead pid: the next fetch removes it. Anything
# unexpected falls back to running pack-objects without the cache.
set -u

case " $* " in *" pack-objects "*" --stdout "*) ;; *) exec "$@" ;; esac
dir=${CAIRN_PACK_CACHE_DIR:-}
[ -n "$dir" ] || exec "$@"
max_age=${CAIRN_PACK_CACHE_MAX_AGE:-300}

mkdir -p -m 0700 "$dir" 2>/dev/null
input=$(mktemp "$dir/input.XXXXXXXX") || exec "$@"
trap 'rm -f "$input"' EXIT
trap 'exit 129' HUP INT PIPE TERM
cat > "$input" || exit 128
key=$({ pwd -P; printf '%s\n' "$#" "$@"; cat "$input"; } | sha256sum) || exit 128
key=${key%% *}
sub=$dir/$(printf '%.2s' "$key")
mkdir -p -m 0700 "$sub" || exit 128
pack=$sub/$key.pack
lock=$sub/$key.lock
tmp=$sub/$key.tmp

fresh() {
  [ -f "$pack" ] || return 1
  written=$(stat -c %Y "$pack" 2>/dev/null) || return 1
  [ $(( $(date +%s) - written )) -lt "$max_age" ]
}

# Sends the pack being written by pid $1 as it grows, then whatever was left; 0 once the writer
# has renamed it into place, 1 when it failed (the client then sees a broken pack and fails), 2
# when the writer was already done before anything was read (the caller looks again).
follow() {
  command exec 3< "$tmp" 2>/dev/null || return 2
  tail -c +1 -s 0.01 --pid="$1" -f <&3 || return 1
  exec 3<&-
  while [ -d "$lock" ]; do sleep 0.01; done
  [ -f "$pack" ]
}

attempt=0
while [ $attempt -lt 3 ]; do
  attempt=$((attempt + 1))
  # Opened first: a writer may replace an expired pack meanwhile, and an open file stays whole.
  if fresh && command exec 4< "$pack" 2>/dev/null; then
    cat <&4
    exit $?
  fi
  if mkdir "$lock" 2>/dev/null; then
    # Another writer may have finished between the look above and the lock.
    if fresh && command exec 4< "$pack" 2>/dev/null; then
      rm -rf "$lock"
      cat <&4
      exit $?
    fi
    rm -f "$pack"
    : > "$tmp" || exit 128
    "$@" < "$input" >> "$tmp" &
    writer=$!
    echo "$writer" > "$lock/pid.tmp" && mv "$lock/pid.tmp" "$lock/pid"
    exec 3< "$tmp"
    tail -c +1 -s 0.01 --pid="$writer" -f <&3 &
    sender=$!
    wait "$writer"
    status=$?
    if [ $status -eq 0 ]; then mv "$tmp" "$pack"; else rm -f "$tmp"; fi
    rm -rf "$lock"
    wait "$sender" || status=1
    exit $status
  fi
  # Someone else writes it: wait for its pid (written right after mkdir), then follow.
  i=0
  while [ -d "$lock" ] && [ ! -f "$lock/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
  pid=$(cat "$lock/pid" 2>/dev/null) || continue
  case $pid in '' | *[!0-9]*) continue ;; esac
  if kill -0 "$pid" 2>/dev/null; then
    follow "$pid"
    status=$?
    [ $status -eq 2 ] || exit $status
    continue
  fi
  # The writer died without cleaning up (killed): clear its leftovers, then try again.
  [ -d "$lock" ] && [ "$(cat "$lock/pid" 2>/dev/null)" = "$pid" ] && rm -rf "$lock" "$tmp"
done
"$@" < "$input"
