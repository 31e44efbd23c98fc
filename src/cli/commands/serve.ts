import { AppError } from '../../errors.js';
import { defineCommand } from '../definition.js';

interface ServeCommandOptions {
  host?: string;
  port?: string;
  upstream?: string;
  metricsPort?: string;
  metricsHost?: string;
}

export const serveCommand = defineCommand<ServeCommandOptions>({
  name: 'serve',
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
  notes: 'See the README section "Running the server" for every environment variable.',
  run: async (session, _out, { options }) => {
    const { runServer } = await import('../../http/server.js');
    const port = options.port === undefined ? undefined : parsePort(options.port);
    await runServer({
      databaseUrl: session.options.databaseUrl,
      host: options.host,
      port,
      upstream: options.upstream,
      ...(options.metricsPort !== undefined ? { metricsPort: options.metricsPort } : {}),
      ...(options.metricsHost !== undefined ? { metricsHost: options.metricsHost } : {}),
    });
  },
});

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) {
    throw new AppError('invalid_argument', `--port must be a whole number from 0 to 65535, got '${value}'`);
  }
  return port;
}
