// One client's address as what it is counted by, wherever a limit counts clients: the public port's
// connections (http/server/connections.ts) and the answers on record (runtime/decision-records.ts).
import { isIPv6 } from 'node:net';

/** What a client counts against: an IPv4 address as it is, an IPv6 one by its /64 (one client holds 2^64). */
export function addressKey(address: string): string {
  if (!isIPv6(address) || address.startsWith('::ffff:')) return address;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16)).join(':')}::/64`;
}
