import { describe, expect, it } from 'vitest';
import type { Provider } from '../../src/config.js';
import { schemaFile } from './engine-helpers.js';

/** The schema without comments, blank lines, the generator's output folder and the datasource provider. */
function comparable(provider: Provider): string[] {
  return schemaFile(provider)
    .content.split('\n')
    .map((line) => line.replace(/\/\/.*$/, '').replace(/\s+/g, ' ').trim())
    .filter((line) => line !== '' && !/^output = /.test(line) && !/^provider = "(sqlite|postgresql)"$/.test(line));
}

interface Model {
  fields: Record<string, string>;
  attributes: string[];
}

/** model name -> field name -> "type attributes", plus the block attributes (@@id, @@index, @@map...). */
function models(provider: Provider): Record<string, Model> {
  const result: Record<string, Model> = {};
  let current: Model | undefined;
  for (const line of comparable(provider)) {
    const opening = /^model (\w+) \{$/.exec(line);
    if (opening) {
      current = { fields: {}, attributes: [] };
      result[opening[1]!] = current;
    } else if (line === '}') {
      current = undefined;
    } else if (current && line.startsWith('@@')) {
      current.attributes.push(line);
    } else if (current) {
      const [name, ...rest] = line.split(' ');
      current.fields[name!] = rest.join(' ');
    }
  }
  return result;
}

describe('the SQLite and PostgreSQL schemas', () => {
  it('differ only in the generator output folder and the datasource provider', () => {
    expect(comparable('postgresql')).toEqual(comparable('sqlite'));
  });

  it('define the same models, fields, types and attributes', () => {
    const sqlite = models('sqlite');
    expect(Object.keys(sqlite).sort()).toEqual([
      'AssertionJti',
      'AuditChain',
      'AuditEvent',
      'CompanyMapping',
      'ExposureHour',
      'GateDecision',
      'GateDecisionUnrecorded',
      'KeyPair',
      'LeakReport',
      'Lease',
      'Partner',
      'PartnerLimit',
      'PartnerNetwork',
      'RecordingWindow',
      'Revision',
      'ServeInstance',
      'SigningKey',
      'UsageHour',
      'WebhookDelivery',
      'WebhookEndpoint',
      'WebhookEvent',
      'WebhookReminder',
    ]);
    expect(models('postgresql')).toEqual(sqlite);
    // The parser really read the fields (a broken parser would make the comparison above vacuous).
    expect(sqlite.KeyPair?.fields.secretHash).toBe('String? @map("secret_hash")');
    expect(sqlite.CompanyMapping?.attributes).toContain('@@id([partnerId, companyId])');
  });

  it('keep each generated client apart', () => {
    expect(schemaFile('sqlite').content).toMatch(/output\s*=\s*"\.\.\/\.\.\/src\/db\/generated\/sqlite"/);
    expect(schemaFile('postgresql').content).toMatch(/output\s*=\s*"\.\.\/\.\.\/src\/db\/generated\/postgresql"/);
    expect(schemaFile('sqlite').content).toMatch(/provider\s*=\s*"sqlite"/);
    expect(schemaFile('postgresql').content).toMatch(/provider\s*=\s*"postgresql"/);
  });
});
