// A small Prometheus text exposition: request counters by route and status, plus gauges sampled
// at scrape time.
export function createMetrics() {
  const requests: Record<string, number> = {};
  return {
    countRequest(method: string, route: string, status: number) {
      const key = `method="${method}",route="${route}",status="${status}"`;
      requests[key] = (requests[key] ?? 0) + 1;
    },
    render(gauges: { name: string; help: string; values: { labels: Record<string, string>; value: number }[] }[]): string {
      const lines = ['# HELP scalegate_http_requests_total HTTP requests by route and status', '# TYPE scalegate_http_requests_total counter'];
      for (const [labels, count] of Object.entries(requests)) lines.push(`scalegate_http_requests_total{${labels}} ${count}`);
      for (const gauge of gauges) {
        lines.push(`# HELP ${gauge.name} ${gauge.help}`, `# TYPE ${gauge.name} gauge`);
        for (const v of gauge.values) {
          const labels = Object.entries(v.labels).map(([k, val]) => `${k}="${val.replace(/["\\\n]/g, '_')}"`).join(',');
          lines.push(`${gauge.name}${labels ? `{${labels}}` : ''} ${v.value}`);
        }
      }
      return lines.join('\n') + '\n';
    },
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
