#!/usr/bin/env bash
# The nightly history on its own branch (leak-history), where nothing evicts it.
#   history-branch.sh fetch DB          copy the branch's history.sqlite to DB (if any)
#   history-branch.sh push DB NIGHT     commit the branch's history with NIGHT's runs
#                                       appended (rows are keyed by summary hash:
#                                       nothing doubles) to the branch; retried when
#                                       another night pushed in between
set -euo pipefail
BRANCH=${LEAK_HISTORY_BRANCH:-leak-history}
FILE=history.sqlite

fetch() {
  local db=$1
  mkdir -p "$(dirname "$db")"
  if git fetch --quiet origin "$BRANCH" 2>/dev/null; then
    git show "FETCH_HEAD:$FILE" > "$db"
    echo "history: $(du -h "$db" | cut -f1) from branch $BRANCH"
  else
    echo "history: no branch $BRANCH yet; this night starts it"
  fi
}

push() {
  local db=$1 night=$2 parent blob tree commit
  export GIT_AUTHOR_NAME="leak-harness nightly" GIT_COMMITTER_NAME="leak-harness nightly"
  export GIT_AUTHOR_EMAIL="leak-harness-nightly@users.noreply.github.com"
  export GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
  for attempt in 1 2 3 4 5; do
    parent=""
    if git fetch --quiet origin "$BRANCH" 2>/dev/null; then
      parent=$(git rev-parse FETCH_HEAD)
      # The branch as it is now (another night may have pushed since we fetched), plus
      # our night appended again: rows are keyed by summary hash, nothing doubles.
      git show "FETCH_HEAD:$FILE" > "$db"
      .venv/bin/leak-harness report "$night" --out "$night" --history "$db" > /dev/null || true
    fi
    # Plumbing, not a checkout: the branch holds one file and shares no history with main.
    blob=$(git hash-object -w "$db")
    tree=$(printf '100644 blob %s\t%s\n' "$blob" "$FILE" | git mktree)
    commit=$(git commit-tree "$tree" ${parent:+-p "$parent"} -m "history: night of $(date -u +%Y-%m-%d)")
    if git push --quiet origin "$commit:refs/heads/$BRANCH"; then
      echo "history: pushed to $BRANCH"
      return 0
    fi
    sleep $((attempt * 5))
  done
  echo "history: could not push to $BRANCH after 5 attempts" >&2
  return 1
}

"$@"
