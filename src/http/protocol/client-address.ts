// Who the client is: computed once per request, at its entry (the data handler, or Fastify's first hook for
// the other routes), and used by every later step (the token endpoint's per-address throttle, the network
// rules, the request log, the exchange's unlisted-address record, the engine's X-Forwarded-For).
import { createRequire } from 'node:module';
import type { IncomingMessage } from 'node:http';

/** The client as the gateway determined it. */
export interface ClientAddress {
  /** The client's address: the TCP peer, or behind trusted proxies the right-most untrusted X-Forwarded-For entry. */
  readonly address: string;
  /** The scheme the client used: a trusted peer's X-Forwarded-Proto (http or https), else http. */
  readonly proto: 'http' | 'https';
}

export type TrustFunction = (address: string, hop: number) => boolean;

type ProxyAddr = typeof import('@fastify/proxy-addr');

function proxyAddr(): ProxyAddr {
  return createRequire(import.meta.url)('@fastify/proxy-addr') as ProxyAddr;
}

/**
 * The trust function for a list of addresses, CIDRs and proxy-addr's words (config.ts reads
 * PUBLIC_API_TRUSTED_PROXIES into them): proxy-addr's `compile`, as Fastify's trustProxy; null for none.
 */
export function compileTrust(entries: readonly string[]): TrustFunction | null {
  if (entries.length === 0) return null;
  return proxyAddr().compile([...entries]);
}

const PLAIN_HTTP: ClientAddress = Object.freeze({ address: '', proto: 'http' });
/** Without trusted proxies the client is the socket's peer: kept on the socket, one object per connection. */
const kClient = Symbol('partnerctl.client');
type WithClient = { [kClient]?: ClientAddress };

/** The per-request computation, bound to the server's trust. */
export class ClientAddresses {
  private readonly proxyaddr: ProxyAddr | null;

  constructor(private readonly trust: TrustFunction | null) {
    this.proxyaddr = trust === null ? null : proxyAddr();
  }

  /** The same trust, for Fastify's trustProxy (so `request.ip` agrees); undefined when none is trusted. */
  get trustProxy(): TrustFunction | undefined {
    return this.trust ?? undefined;
  }

  /**
   * The client of one request. Without trusted proxies, the TCP peer, and no header is looked at. With them,
   * proxy-addr's answer: when the peer is trusted, the right-most X-Forwarded-For entry that is not itself
   * trusted (an entry left of it, which the client may have written, is never reached).
   */
  of(request: IncomingMessage): ClientAddress {
    const socket = request.socket as typeof request.socket & WithClient;
    if (this.trust === null || this.proxyaddr === null) {
      const known = socket[kClient];
      if (known !== undefined) return known;
      const peer = socket.remoteAddress ?? '';
      if (peer === '') return PLAIN_HTTP;
      const client: ClientAddress = Object.freeze({ address: peer, proto: 'http' });
      socket[kClient] = client;
      return client;
    }
    const peer = socket.remoteAddress ?? '';
    const address = this.proxyaddr(request, this.trust);
    return { address, proto: peer !== '' && this.trust(peer, 0) ? forwardedProto(request.headers['x-forwarded-proto']) : 'http' };
  }
}

/** The last value a trusted proxy set, when it is http or https. */
function forwardedProto(value: string | string[] | undefined): 'http' | 'https' {
  if (value === undefined) return 'http';
  const text = Array.isArray(value) ? value.join(',') : value;
  const last = text.slice(text.lastIndexOf(',') + 1).trim().toLowerCase();
  return last === 'https' ? 'https' : 'http';
}
