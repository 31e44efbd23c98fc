// The public port's connection limits (PUBLIC_API_MAX_CONNECTIONS, PUBLIC_API_MAX_CONNECTIONS_PER_ADDRESS):
// a flood of sockets from one host, idle or not, cannot use up the process's descriptors, and every other
// client is still answered. A connection that has sent no byte once the request timeout has passed is
// closed; one that sent any is Node's to time out (a partial head gets its 408, an idle keep-alive its close).
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from '../../domain/rules/address-key.js';
import type { TrustFunction } from '../protocol/client-address.js';

export interface ConnectionLimits {
  total: number;
  perAddress: number;
  /** How long a connection may stay open without sending a byte. */
  idleMs: number;
  /** Trusted proxies carry many clients' connections: they are not held to the per-address limit. */
  trusted: TrustFunction | null;
}

export function limitConnections(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.total;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress ?? '';
    if (limits.trusted === null || !limits.trusted(peer, 0)) {
      const key = addressKey(peer);
      const count = (open.get(key) ?? 0) + 1;
      if (count > limits.perAddress) {
        socket.destroy();
        return;
      }
      open.set(key, count);
      socket.once('close', () => {
        const left = open.get(key)! - 1;
        if (left === 0) open.delete(key);
        else open.set(key, left);
      });
    }
    const silent = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, limits.idleMs);
    silent.unref();
    socket.once('close', () => clearTimeout(silent));
  });
}
