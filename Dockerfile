# minibroker: one image for the broker, ZooKeeper and the Spark report.
#
#   docker build -t minibroker .
#   docker run -e MINIBROKER_BROKER_ID=1 -e MINIBROKER_ZOOKEEPER_CONNECT=zk:2181 minibroker
#
# BASE_IMAGE may be any Debian-like image with python3 (3.11+) and its venv module; a
# Java runtime is installed from Debian's packages unless the base already has one.
# Without a registry (e.g. CI here), docker/build-base-image debootstraps such a base
# locally and scripts/docker-smoke passes it as --build-arg BASE_IMAGE=... .
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="minibroker" \
      org.opencontainers.image.description="Kafka-style commit log: broker, ZooKeeper, Spark report"

ENV LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/minibroker \
    PATH=/opt/minibroker/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Java 17 runs ZooKeeper (jars from the pyspark wheel) and Spark. The public python
# images have none; a locally built base already carries it, so no apt run is needed.
# (Debian's slim images drop /usr/share/man, where the JRE's postinst links man pages.)
RUN if ! command -v java >/dev/null 2>&1; then \
        mkdir -p /usr/share/man/man1 \
        && apt-get update \
        && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && java -version

# A virtualenv works the same on python:*-slim (its python lives in /usr/local) and on
# Debian's own python3 (which refuses system-wide pip installs, PEP 668).
RUN python3 -m venv "$VIRTUAL_ENV"

# Dependencies first, from pyproject.toml alone, so editing the source does not
# download pyspark (~400 MB) again.
COPY pyproject.toml /tmp/build/pyproject.toml
RUN python3 -c "import tomllib; p = tomllib.load(open('/tmp/build/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['fast']))" \
        > /tmp/build/requirements.txt \
    && pip install -r /tmp/build/requirements.txt

COPY . /tmp/build/src
RUN pip install --no-deps '/tmp/build/src[fast]' \
    && install -m 0755 /tmp/build/src/docker/entrypoint.py /usr/local/bin/minibroker-entrypoint \
    && install -m 0755 /tmp/build/src/docker/healthcheck.py /usr/local/bin/minibroker-healthcheck \
    && rm -rf /tmp/build \
    && minibroker --help >/dev/null

# A non-root user owns the data volume. Named volumes mounted on the sub-directories
# start with the image's ownership, so the broker can write them.
RUN useradd --system --uid 10001 --home-dir /var/lib/minibroker --shell /usr/sbin/nologin minibroker \
    && mkdir -p /var/lib/minibroker/logs-a /var/lib/minibroker/logs-b \
        /var/lib/minibroker/zookeeper /var/lib/minibroker/reports \
    && chown -R minibroker:minibroker /var/lib/minibroker
USER minibroker
WORKDIR /var/lib/minibroker
VOLUME ["/var/lib/minibroker"]

# Defaults for a lone broker; docker-compose.yml sets its own.
ENV MINIBROKER_LISTENERS=0.0.0.0:9092 \
    MINIBROKER_LOG_DIRS=/var/lib/minibroker/logs-a,/var/lib/minibroker/logs-b \
    MINIBROKER_METRICS_PORT=9308
EXPOSE 9092 9308

# Healthy = the broker answers ApiVersions on its listener (or, for a container
# running `zookeeper`, ZooKeeper answers `srvr`).
HEALTHCHECK --interval=5s --timeout=4s --start-period=60s --retries=3 \
    CMD ["minibroker-healthcheck"]

ENTRYPOINT ["minibroker-entrypoint"]
CMD ["broker"]
