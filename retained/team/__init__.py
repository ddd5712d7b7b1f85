"""Team memory: one project's shared records travel through git, provable and conflict-free.

Each writer (a machine + user, `state.writer_id`) appends the records it shares to its own hash-chained
log on a ref of the project's remote that holds only memory (`refs/retained/memory`: `format` and
`writers/<writer>/<n>.jsonl`, each log cut into segments of fixed length), through retained's own bare
repository in the store directory, never the project's `.git`. A sync fetches, verifies every writer's
chain, merges each file by content into a verified local mirror that the index reads, appends this
writer's new records and pushes.

    hlc       the hybrid logical clock and the team's total order (pure)
    wlog      the writer log: format, verify, merge, purge (pure)
    verifier  a standalone, standard-library check of a memory ref (the one docs/FORMAT.md shows)
    git       git as a subprocess, for retained's bare repository
    mirror    the verified local copy of every writer's log
    state     writer id, shared projects, sync state, the per-project lock (atomic files)
    signing   each writer's head signed with its SSH key (ssh-keygen -Y), keys pinned per clone
    sync      one sync: `sync(team_dir, remote, writer, outgoing, purges) -> SyncResult`
"""
