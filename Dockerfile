# scalegate control plane image: the API, the orchestrator worker and the agent share it; the
# compose file picks the entry point per service.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY . .
ENV NODE_ENV=production
USER node
EXPOSE 8080 7401
CMD ["node", "--import", "tsx", "api/main.ts"]
