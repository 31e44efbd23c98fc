// A partner's network rules (set-network): the client addresses it may use the API from, as CIDRs. No rules,
// no restriction. Stored canonical (the network address and its prefix, `a.b.c.d/n` or IPv6's `x::/n`),
// matched with proxy-addr's compiled matcher, which treats an IPv4-mapped IPv6 address as its IPv4 address.
import { createRequire } from 'node:module';
import type { Database } from '../../db/client.js';
import { deleteNetwork, networkOf, upsertNetwork } from '../../db/repositories/networks.js';
import type { Queryable } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { runUnit, type Actor, type Unit } from './transactions.js';

type IpAddr = typeof import('ipaddr.js');
type ProxyAddr = typeof import('@fastify/proxy-addr');

const require = createRequire(import.meta.url);

/**
 * The canonical form of one CIDR or bare address (a bare address is its /32 or /128); throws
 * `invalid_argument` naming the value when it is neither.
 */
export function canonicalCidr(value: string): string {
  const ipaddr = require('ipaddr.js') as IpAddr;
  const text = value.trim();
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const invalid = () => new AppError('invalid_argument', `'${value.slice(0, 100)}' is not an IPv4 or IPv6 address or CIDR (such as 203.0.113.0/24 or 2001:db8::/32)`, { field: 'allow' });
  // Four decimal parts for IPv4: no octal, hexadecimal or shortened forms whose meaning differs between tools.
  if (ipaddr.IPv4.isValidFourPartDecimal(address)) {
    const bits = slash < 0 ? 32 : prefixOf(text.slice(slash + 1), 32);
    if (bits === null) throw invalid();
    return usable(`${ipaddr.IPv4.networkAddressFromCIDR(`${address}/${bits}`).toString()}/${bits}`, invalid);
  }
  if (!address.includes(':') || !ipaddr.IPv6.isValid(address) || address.includes('%')) throw invalid();
  const bits = slash < 0 ? 128 : prefixOf(text.slice(slash + 1), 128);
  if (bits === null) throw invalid();
  return usable(`${ipaddr.IPv6.networkAddressFromCIDR(`${address}/${bits}`).toString()}/${bits}`, invalid);
}

/** A rule the CLI accepts is one the server's matcher can use. */
function usable(cidr: string, invalid: () => AppError): string {
  try {
    compiled([cidr]);
  } catch {
    throw invalid();
  }
  return cidr;
}

function prefixOf(text: string, max: number): number | null {
  if (!/^\d{1,3}$/.test(text)) return null;
  const bits = Number(text);
  return bits <= max ? bits : null;
}

/** The rules as given (each checked, made canonical), without repeats, in the order given. */
export function canonicalRules(values: readonly string[]): string[] {
  const out: string[] = [];
  for (const value of values) {
    const cidr = canonicalCidr(value);
    if (!out.includes(cidr)) out.push(cidr);
  }
  return out;
}

/** The rules as stored (one text column): comma-separated canonical CIDRs. */
export function rulesFromColumn(column: string | null): string[] {
  return column === null || column === '' ? [] : column.split(',');
}

export type AddressMatcher = (address: string) => boolean;

const matchers = new Map<string, AddressMatcher>();

/**
 * Matches addresses against rules: proxy-addr's compiled matcher, plus the /0 prefixes it refuses to compile:
 * `0.0.0.0/0` is every IPv4 address (IPv4-mapped IPv6 included), `::/0` every address. Throws on a rule it
 * cannot use.
 */
function compiled(rules: readonly string[]): AddressMatcher {
  const ipaddr = require('ipaddr.js') as IpAddr;
  const everyIPv4 = rules.some((rule) => rule.endsWith('/0') && !rule.includes(':'));
  const every = rules.some((rule) => rule.endsWith('/0') && rule.includes(':'));
  const rest = rules.filter((rule) => !rule.endsWith('/0'));
  const trust = rest.length > 0 ? (require('@fastify/proxy-addr') as ProxyAddr).compile(rest) : () => false;
  if (!every && !everyIPv4) return (address) => address !== '' && trust(address, 0);
  return (address) => {
    if (!ipaddr.isValid(address)) return false;
    const ip = ipaddr.parse(address);
    return every || ip.kind() === 'ipv4' || (ip as InstanceType<IpAddr['IPv6']>).isIPv4MappedAddress() || trust(address, 0);
  };
}

/**
 * A matcher for stored rules (cached by their text); null for no rules. Rules it cannot use (written around
 * set-network, which refuses them) refuse every address, with one warning naming them: the partner gets 403
 * address_not_allowed, never a 500 or a database error.
 */
export function matcherOf(column: string | null): AddressMatcher | null {
  if (column === null || column === '') return null;
  let matcher = matchers.get(column);
  if (matcher === undefined) {
    try {
      matcher = compiled(rulesFromColumn(column));
    } catch (error) {
      process.emitWarning(
        `network rules '${column.slice(0, 200)}' cannot be used (${(error as Error).message}): every address is refused until set-network replaces them`,
        { code: 'PARTNERCTL_NETWORK_RULES' },
      );
      matcher = () => false;
    }
    if (matchers.size >= 10_000) matchers.clear();
    matchers.set(column, matcher);
  }
  return matcher;
}

/** A partner's network rules, canonical; empty: none. */
export function partnerNetwork(db: Database, partnerId: string): Promise<string[]> {
  return partnerNetworkOn(db.sql, partnerId);
}

/** The same, read inside the domain's own transaction. */
export async function partnerNetworkOn(q: Queryable, partnerId: string): Promise<string[]> {
  return rulesFromColumn(await networkOf(q, partnerId));
}

/**
 * Sets a partner's rules (replacing any), or clears them with an empty list; audited as
 * `partner.network_set` (before and after) when something changed. Running servers apply it within their
 * staleness bound (a second): the mutation bumps the revision their caches watch.
 */
export async function setNetworkIn(unit: Unit, reference: string, allow: readonly string[]): Promise<{ partner: PartnerRecord; allow: string[]; changed: boolean }> {
  const rules = canonicalRules(allow);
  const partner = await findPartner(unit.tx, reference);
  const before = await partnerNetworkOn(unit.tx, partner.id);
  if (before.join(',') === rules.join(',')) return { partner, allow: before, changed: false };
  if (rules.length === 0) await deleteNetwork(unit.tx, partner.id);
  else await upsertNetwork(unit.tx, partner.id, rules.join(','), new Date(unit.clock.now()));
  unit.audit({ action: 'partner.network_set', partnerId: partner.id, details: { before: { allow: before }, after: { allow: rules } } });
  return { partner, allow: rules, changed: true };
}

export function setNetwork(db: Database, who: Actor, reference: string, allow: readonly string[]): Promise<{ partner: PartnerRecord; allow: string[]; changed: boolean }> {
  // Checked before any transaction opens: a bad CIDR is a usage error, whatever the database says.
  canonicalRules(allow);
  return runUnit(db, who, (unit) => setNetworkIn(unit, reference, allow));
}
