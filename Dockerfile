# scalegate control plane image: the API, the orchestrator worker and the agent share it; the
# compose file picks the entry point per service. It runs as the unprivileged `node` user (uid
# 1000); /state, an agent's state folder, belongs to that user (a fresh named volume mounted there
# takes this ownership; docker-compose.yml's agent-state service fixes older volumes).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY . .
# the CLI compiled once (cli/bundle.js), so `scalegate` in the image starts in node's own time
RUN node cli/bundle.js && mkdir -p /state && chown node:node /state && chmod 700 /state
ENV NODE_ENV=production
USER node
EXPOSE 8080 7401
CMD ["node", "--import", "tsx", "api/main.ts"]
