FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config config
COPY garden garden
COPY groups groups
COPY operator_messages operator_messages
COPY schema schema
COPY manage.py ./
RUN pip install --no-cache-dir .
