# Roster server image: one static binary on an empty base, so it builds and runs with no
# registry access. scripts/build-image.sh prepares the build context (build/roster and the
# build/rootfs skeleton) and runs `docker build -f Dockerfile <context>`; the repository root
# is never sent as a context.
FROM scratch

# The binary stays root-owned and read-only for the server's user.
COPY build/roster /roster

# /data (the volume, mode 0700) and /tmp (mode 1777) must exist and be owned by the server's
# user before the first start: a scratch image has no shell to create or chown them at run
# time. A fresh named volume mounted on /data takes this ownership from the image.
COPY --chown=65532:65532 build/rootfs/ /

USER 65532:65532
ENV ROSTER_DATA_DIR=/data
VOLUME /data
# 8848: HTTP API, 7848: Raft.
EXPOSE 8848 7848

# Health: the image has no shell, so a healthcheck runs the binary itself, e.g.
#   ["CMD", "/roster", "ready", "--addr", "127.0.0.1:8848"]
ENTRYPOINT ["/roster", "server"]
