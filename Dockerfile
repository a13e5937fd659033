# The Shardline server image: web (gunicorn, the CMD) and, from the same
# image, the one-shot migration and the Celery worker. docker-compose.yml
# wires it to Postgres and Redis.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app
COPY pyproject.toml README.md ./
COPY server ./server
COPY dashboard ./dashboard
COPY worker_sdk ./worker_sdk
COPY migrations ./migrations
COPY manage.py ./
RUN pip install --no-cache-dir '.[server,tables]' \
 && DATABASE_URL=postgres://build@localhost/build SECRET_KEY=build python manage.py collectstatic --noinput

# Every process of the image (web, migrate, worker) writes its metrics files
# here, so the folder exists from the start and belongs to the app user.
RUN useradd --system --uid 1000 shardline \
 && mkdir -p /tmp/prometheus \
 && chown shardline:shardline /tmp/prometheus
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus \
    WEB_CONCURRENCY=4
USER shardline
EXPOSE 8000
# Files left by an earlier run of this container (a restart) would add dead
# workers' counts to /metrics: the web server wipes them when it starts, and
# only it. gunicorn takes its number of workers from WEB_CONCURRENCY.
CMD ["sh", "-c", "if [ -n \"$PROMETHEUS_MULTIPROC_DIR\" ]; then rm -f \"$PROMETHEUS_MULTIPROC_DIR\"/*.db; fi; exec gunicorn --config python:server.gunicorn_conf server.asgi --worker-class uvicorn_worker.UvicornWorker --bind 0.0.0.0:8000 --graceful-timeout 20"]
