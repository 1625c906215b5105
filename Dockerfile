# An exact base: a rebuild gets the same Python; bump it here, deliberately.
FROM python:3.11.11-slim-bookworm
WORKDIR /app
# The dependencies first, from pyproject.toml alone, so a change to the code reuses this layer.
COPY pyproject.toml /app/
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt
COPY . /app
# Editable, so templates, static files and JSON schemas are used in place; nothing to fetch.
RUN pip install --no-cache-dir --no-deps -e . \
    && useradd --system --uid 10001 --home-dir /app garden \
    && mkdir -p /data/runtime /app/var \
    && chown -R garden /data/runtime /app/var
USER garden
EXPOSE 8000
