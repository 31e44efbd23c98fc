import { defineCommand } from '../definition.js';

export const serveCommand = defineCommand({
  name: 'serve',
  group: 'Server',
  summary: 'run the public partner API',
  description: 'run the public partner API (POST /public/v1/auth/token and the data endpoints)',
  options: [
    { flags: '--host <host>', description: 'address to listen on (env HOST, default 127.0.0.1)' },
    { flags: '--port <port>', description: 'port to listen on (env PORT, default 8080; 0 picks a free one)' },
    { flags: '--upstream <url>', description: 'recommendation engine base URL (env PUBLIC_API_UPSTREAM_URL)' },
    {
      flags: '--metrics-port <port>',
      description: 'serve GET /metrics (Prometheus) on this port, never the public one (env PUBLIC_API_METRICS_PORT; default off)',
    },
    { flags: '--metrics-host <host>', description: 'address of the metrics listener (env PUBLIC_API_METRICS_HOST, default 127.0.0.1)' },
  ],
  notes: 'Every environment variable: docs/configuration.md.',
  // Its options win over the server's variables they name, in the one configuration (src/config.ts).
  serverFlags: (options) => options,
  run: async (session) => {
    const { runServer } = await import('../../http/server/server.js');
    session.requireDatabase();
    await runServer({ config: session.config, databaseUrl: session.databaseChoice.url }, session.terminal);
  },
});
