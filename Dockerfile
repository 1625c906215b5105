FROM python:3.11-slim
WORKDIR /app
COPY . /app
# Editable, so templates, static files and JSON schemas are used in place.
RUN pip install --no-cache-dir -e .
