# epicenter for docker-compose.yml: built from this checkout, run on Debian 12 slim.
# The image writes to a ClickHouse server (storage.clickhouse), so it carries no chDB
# library; for the embedded store, run scripts/setup in the image and mount its cache.
FROM rust:1.85.0-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p epicenter

FROM debian:12.7-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/epicenter /usr/local/bin/epicenter
# The spool and the fleet's targets file live in named volumes, which take these owners.
RUN mkdir -p /var/lib/epicenter /fleet && chown nobody /var/lib/epicenter /fleet
USER nobody
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/epicenter"]
CMD ["run", "--config", "/etc/epicenter/epicenter.yml"]
