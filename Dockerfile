# One image for every service; docker-compose.yml picks the entry point.
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
ENV NODE_ENV=production
CMD ["node", "cli/start.ts", "--no-demo"]
