"""What well-known tools and services are: a small table that bridges a prompt's words to a record's.

A person asks about "the container orchestrator" or "the CI"; the record says "Kubernetes" or "GitHub
Actions". Neither the words nor the small model join the two (the semantic tier's research: the misses
that remained needed world knowledge). Each row of KINDS is one kind of tool: the names of well-known
tools of that kind, then the plain words people use for the kind. `bridged(text)` gives the names a
text calls for, by kind word or by a name of the same kind ('k8s' calls for 'kubernetes' too), leaving
out those the text already holds. Search adds the records holding them as candidates; recall counts a
record holding one as evidence beside its closeness in meaning (retained/recall.py).

Written from general knowledge of the tools, not from any eval's prompts. Standard library only, no
I/O: it is on the prompt hook's path.
"""

from __future__ import annotations

import re

# (names of tools of a kind, words for the kind). A name or word is matched as whole words, a plural
# 's', 'es' or 'ies' allowed on its last word; hyphens and dots count as spaces.
KINDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("kubernetes", "k8s", "eks", "gke", "aks", "openshift", "nomad", "helm", "kubectl"),
     ("container orchestrator", "container orchestration", "orchestrator", "cluster", "pod", "deployment manifest")),
    (("github actions", "gitlab ci", "circleci", "jenkins", "buildkite", "travis", "workflows", "azure pipelines"),
     ("ci", "continuous integration", "pipeline", "build server", "checks on my pull request", "build job")),
    (("sentry", "bugsnag", "rollbar", "honeybadger", "crashlytics"),
     ("error tracker", "error tracking", "crash report", "crash", "exception", "stack trace")),
    (("datadog", "prometheus", "grafana", "new relic", "dynatrace", "monitor"),
     ("monitoring", "metric", "dashboard", "alert", "alerting", "apm", "latency", "observability")),
    (("terraform", "pulumi", "cloudformation", "opentofu", "ansible", "atlantis"),
     ("infra as code", "infrastructure as code", "iac", "provision", "provisioning", "cloud resource")),
    (("redis", "memcached", "valkey"),
     ("cache", "caching", "in memory store", "key value store", "session store")),
    (("stripe", "braintree", "adyen", "paypal", "paddle"),
     ("payment", "card", "charge", "billing", "checkout", "refund", "subscription", "invoice")),
    (("auth0", "okta", "keycloak", "cognito", "oauth", "oidc", "saml", "jwt"),
     ("login", "log in", "sign in", "signin", "sso", "single sign on", "authentication", "identity provider",
      "password reset")),
    (("kafka", "rabbitmq", "sqs", "sns", "nats", "pubsub", "pub sub", "kinesis", "topic"),
     ("message queue", "message broker", "broker", "event bus", "event", "publish", "subscriber", "consumer")),
    (("sendgrid", "postmark", "mailgun", "ses", "mailchimp", "smtp"),
     ("email", "e mail", "mail", "newsletter", "inbox")),
    (("launchdarkly", "unleash", "flagsmith", "growthbook", "flag"),
     ("feature flag", "feature toggle", "toggle", "kill switch", "gradual rollout")),
    (("poetry", "pip", "pipenv", "uv", "npm", "yarn", "pnpm", "cargo", "bundler", "maven", "gradle"),
     ("package manager", "dependency", "dependencies", "library", "package", "lockfile", "lock file")),
    (("vault", "1password", "secrets manager", "doppler", "sops", "keychain"),
     ("secret", "credential", "password", "api key", "token store")),
    (("elasticsearch", "opensearch", "algolia", "meilisearch", "solr", "typesense"),
     ("search engine", "full text search", "product search", "site search", "search index")),
    (("celery", "sidekiq", "rq", "dramatiq", "temporal", "airflow", "cron", "resque"),
     ("task queue", "job queue", "background job", "background task", "worker", "scheduled job", "retry")),
    (("black", "ruff", "eslint", "prettier", "flake8", "pylint", "rubocop", "gofmt", "pre commit"),
     ("formatter", "formatting", "linter", "lint", "code style")),
    (("postgresql", "postgres", "mysql", "mariadb", "sqlite", "rds", "aurora", "alembic", "flyway", "liquibase"),
     ("database", "db", "schema", "migration", "column", "sql")),
    (("cloudflare", "cloudfront", "fastly", "akamai", "cdn"),
     ("content delivery", "edge cache", "static asset", "cached page", "purge")),
    (("loki", "elk", "kibana", "splunk", "papertrail", "promtail", "logstash", "fluentd"),
     ("logs", "logging", "log aggregation", "log search")),
    (("pagerduty", "opsgenie", "victorops", "on call"),
     ("paged", "page", "pager", "incident", "outage", "woken up", "goes down", "escalation")),
    (("jira", "linear", "github issues", "youtrack"),
     ("ticket", "issue tracker", "bug tracker", "backlog", "sprint")),
    (("react native", "expo", "flutter", "swiftui", "kotlin", "xcode", "testflight", "eas"),
     ("mobile app", "phone app", "ios", "android", "app store", "over the air", "ota")),
    (("k6", "locust", "jmeter", "gatling", "artillery"),
     ("load test", "stress test", "performance test", "benchmark")),
    (("s3", "gcs", "azure blob", "minio", "r2", "bucket"),
     ("object storage", "file storage", "upload", "attachment", "blob storage")),
    (("mkdocs", "sphinx", "docusaurus", "gitbook", "readthedocs", "github pages"),
     ("documentation", "docs site", "documentation site", "user guide")),
    (("openapi", "swagger", "graphql", "protobuf", "grpc"),
     ("api spec", "api contract", "api schema", "client sdk", "generated client")),
    (("ecr", "docker hub", "ghcr", "gcr", "artifact registry", "harbor", "quay"),
     ("container registry", "image registry", "docker image", "container image")),
    (("docker", "podman", "docker compose", "dockerfile"),
     ("container", "containerise", "containerize")),
    (("react", "next js", "nextjs", "vue", "angular", "svelte", "remix", "vite"),
     ("front end", "frontend", "web ui", "single page app", "spa")),
    (("nginx", "caddy", "traefik", "envoy", "haproxy", "apache httpd"),
     ("reverse proxy", "web server", "load balancer", "ingress", "tls termination")),
    (("aws", "gcp", "google cloud", "azure", "digitalocean", "hetzner", "fly io", "heroku", "vercel", "netlify"),
     ("cloud provider", "hosting provider", "cloud account")),
    (("lambda", "cloud functions", "cloud run", "azure functions"),
     ("serverless", "serverless function", "function as a service")),
    (("bigquery", "snowflake", "redshift", "dbt", "databricks", "clickhouse", "looker", "metabase"),
     ("data warehouse", "analytics database", "bi tool", "data pipeline")),
    (("sqlalchemy", "prisma", "django orm", "activerecord", "typeorm", "hibernate", "drizzle"),
     ("orm", "object relational mapper", "query builder", "models layer")),
    (("pytest", "jest", "vitest", "mocha", "rspec", "junit", "unittest", "tox"),
     ("test runner", "test suite", "unit test", "test framework")),
    (("playwright", "cypress", "selenium", "puppeteer"),
     ("end to end test", "e2e test", "browser test", "ui test", "headless browser")),
    (("mypy", "pyright", "tsc", "typescript"),
     ("type checker", "type checking", "type hint", "static types")),
    (("webpack", "esbuild", "rollup", "parcel", "turbopack", "babel"),
     ("bundler", "bundling", "build tool", "asset pipeline")),
    (("tailwind", "bootstrap", "sass", "styled components", "css modules"),
     ("css framework", "styling", "stylesheet", "design tokens")),
    (("pgvector", "pinecone", "qdrant", "weaviate", "milvus", "chroma", "faiss"),
     ("vector database", "vector store", "vector search", "embeddings store", "similarity search")),
    (("slack", "microsoft teams", "discord", "mattermost"),
     ("chat channel", "team chat", "notification channel")),
    (("mixpanel", "amplitude", "posthog", "google analytics", "plausible"),
     ("product analytics", "tracking events", "conversion funnel")),
    (("crowdin", "lokalise", "transifex", "i18next", "gettext"),
     ("translation", "localisation", "localization", "i18n", "l10n", "locale")),
    (("istio", "linkerd", "consul"),
     ("service mesh", "service discovery", "sidecar proxy")),
    (("kong", "apigee", "tyk", "api gateway"),
     ("api gateway", "edge rate limiting")),
    (("route53", "cloud dns", "dnsimple"),
     ("dns", "domain name", "dns record")),
    (("lets encrypt", "certbot", "acm", "cert manager"),
     ("tls certificate", "ssl certificate", "certificate", "https certificate")),
)

_WORDS = r"[a-z0-9]+"


def _split(phrase: str) -> tuple[str, ...]:
    return tuple(re.findall(_WORDS, phrase.lower()))


def _table() -> dict[str, list[tuple[tuple[str, ...], int]]]:
    """First word → [(phrase words, kind)], every name and word of every kind."""
    if not _TABLE:
        for kind, (names, words) in enumerate(KINDS):
            for phrase in (*names, *words):
                parts = _split(phrase)
                if parts:
                    _TABLE.setdefault(parts[0], []).append((parts, kind))
    return _TABLE


_TABLE: dict[str, list[tuple[tuple[str, ...], int]]] = {}


def _forms(word: str) -> list[str]:
    """The word and what it may be the plural of."""
    out = [word]
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        out.append(word[:-2])
    if word.endswith("s") and len(word) > 2:
        out.append(word[:-1])
    return out


def kinds_in(text: str) -> dict[int, bool]:
    """The kinds of tool the text names or speaks of: kind → whether by a phrase of two words or more
    ('crash report', 'container orchestrator'), which rarely means anything else; one word ('cache',
    'page', 'password') often does."""
    words = re.findall(_WORDS, text.lower())
    table = _table()
    found: dict[int, bool] = {}
    for i, word in enumerate(words):
        for form in _forms(word):
            for parts, kind in table.get(form, ()):
                if found.get(kind):
                    continue
                if len(parts) == 1 or all(i + j < len(words) and parts[j] in _forms(words[i + j])
                                          for j in range(1, len(parts))):
                    found[kind] = len(parts) > 1
    return found


def bridged(text: str) -> dict[str, bool]:
    """The names of tools of every kind the text names or speaks of, but not the ones it holds already:
    name → whether the kind was named by a phrase of two words or more (see `kinds_in`)."""
    kinds = kinds_in(text)
    if not kinds:
        return {}
    held = " " + " ".join(re.findall(_WORDS, text.lower())) + " "
    return {name: strong for kind, strong in sorted(kinds.items()) for name in KINDS[kind][0]
            if " " + " ".join(_split(name)) + " " not in held}
