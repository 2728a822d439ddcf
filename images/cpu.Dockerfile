# Hearth engine, CPU image: nothing to pull. `hearth up` sends this file with a build context it
# makes in memory: rootfs/ holds the engine built on the host (target/release/hearth-engine) at
# /usr/local/bin, the monitor (hearth-monitor, which compose's monitor service runs from this
# image) beside it when it is built, and the shared libraries they link (libc, libm, libgcc_s and the dynamic loader,
# as ldd lists them) at their own paths, plus an empty /tmp. The model and the spec are
# bind-mounted read-only at run time; the engine needs no Python, pip or network inside.
FROM scratch
COPY rootfs/ /
# nobody:nogroup; the engine writes nothing but its log (stderr).
USER 65534:65534
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20m --retries=3 \
    CMD ["/usr/local/bin/hearth-engine", "health", "--spec", "/etc/hearth/spec.yaml"]
ENTRYPOINT ["/usr/local/bin/hearth-engine"]
CMD ["serve", "--spec", "/etc/hearth/spec.yaml"]
