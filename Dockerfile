# The Shardline server image: web (gunicorn) and, from the same image, the
# one-shot migration. docker-compose.yml wires it to Postgres.
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

RUN useradd --system --uid 1000 shardline
USER shardline
EXPOSE 8000
CMD ["gunicorn", "server.asgi", "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "0.0.0.0:8000", "--workers", "4", "--graceful-timeout", "20"]
