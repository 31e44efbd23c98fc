import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusOf, type ErrorCode } from '../../src/errors.js';
import { isValidCompanyId } from '../../src/domain/rules/validation.js';
import { engineTarget } from '../../src/http/data-path/forwarding.js';
import { API_ERROR_CODES, COMPANY_ID_PATTERN, DATA_PATH_SCHEMA, openApiDocument } from '../../src/http/openapi/document.js';
import { BASE_PATH } from '../../src/http/protocol/paths.js';

/**
 * The OpenAPI document as third-party tools see it: Redocly's recommended rules (no errors, no warning but
 * the missing licence) and swagger-parser's validation, both run offline on the document the server serves.
 * Each is also run on a broken copy, so a harness that silently passes everything would be caught.
 */

const REDOCLY = resolve('node_modules/@redocly/cli/bin/cli.js');
const run = promisify(execFile);

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer: string }[];
}

let dir: string;

async function lint(document: object, name: string): Promise<LintProblem[]> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(document, null, 2));
  // No network: telemetry and the update check are off, and there is no config to fetch.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  const result = await run(process.execPath, [REDOCLY, 'lint', file, '--format=json'], { cwd: dir, env, maxBuffer: 16 * 1024 * 1024 }).catch(
    (error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: error.stderr ?? '' }),
  );
  const start = result.stdout.indexOf('{');
  if (start < 0) throw new Error(`redocly printed no report: ${result.stderr}`);
  return (JSON.parse(result.stdout.slice(start)) as { problems: LintProblem[] }).problems;
}

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is walked as plain JSON; each test asserts what it reads
type Doc = Record<string, any>;
const doc = (): Doc => JSON.parse(JSON.stringify(openApiDocument())) as Doc;
const METHODS = ['get', 'head', 'options', 'post', 'put', 'patch', 'delete', 'trace'];

function operations(document: Doc): { path: string; method: string; operation: Doc }[] {
  return Object.entries(document.paths as Record<string, Doc>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method) => ({ path, method, operation: item[method] as Doc })),
  );
}

describe('the OpenAPI document, linted and validated', () => {
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'partnerctl-openapi-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('passes Redocly recommended rules: no errors, no warnings but the missing licence', async () => {
    const problems = await lint(doc(), 'served');
    const unexpected = problems.filter((problem) => problem.ruleId !== 'info-license');
    expect(unexpected.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
  });

  it('the Redocly harness does report problems (a broken copy)', async () => {
    const broken = doc();
    delete broken.paths['/auth/token'].post.operationId;
    delete broken.paths['/auth/token'].post.summary;
    const rules = (await lint(broken, 'broken')).map((problem) => `${problem.severity} ${problem.ruleId}`);
    expect(rules).toContain('warn operation-operationId');
    expect(rules).toContain('error operation-summary');
  });

  it('is valid for swagger-parser, and a broken copy is not', async () => {
    const validated = (await SwaggerParser.validate(doc() as never)) as unknown as Doc;
    expect(Object.keys(validated.paths)).toEqual(['/auth/token', '/openapi.json', '/', '/{path}']);
    const broken = doc();
    broken.paths['/auth/token'].post.responses['200'] = { content: {} };
    await expect(SwaggerParser.validate(broken as never)).rejects.toThrow();
    const dangling = doc();
    dangling.paths['/'].get.parameters = [{ $ref: '#/components/parameters/Missing' }];
    await expect(SwaggerParser.validate(dangling as never)).rejects.toThrow();
  });
});

describe('the OpenAPI document, item by item', () => {
  const document = doc();
  const ops = operations(document);

  it('gives every operation a unique operationId, a summary, a tag and 400/408/500', () => {
    const ids = ops.map(({ operation }) => operation.operationId as string);
    expect(ids.every((id) => typeof id === 'string' && /^[A-Za-z][A-Za-z0-9]*$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, operation } of ops) {
      expect(operation.summary, `${method} ${path}`).toBeTruthy();
      expect(operation.tags, `${method} ${path}`).toHaveLength(1);
      for (const status of ['400', '408', '500']) expect(operation.responses[status], `${method} ${path} ${status}`).toBeDefined();
    }
  });

  it('describes /openapi.json itself, GET and HEAD, with no token', () => {
    const item = document.paths['/openapi.json'];
    expect(item.get.security).toEqual([]);
    expect(item.head.security).toEqual([]);
    expect(item.get.responses['200'].content['application/json']).toBeDefined();
    expect(item.head.responses['200'].content).toBeUndefined();
    expect(Object.keys(item.options.responses)).toEqual(expect.arrayContaining(['204', '405']));
  });

  it('lists every status of the token endpoint', () => {
    const responses = document.paths['/auth/token'].post.responses;
    expect(Object.keys(responses).sort()).toEqual(['200', '400', '401', '403', '408', '413', '415', '417', '429', '500', '503']);
    expect(responses['429'].headers['Retry-After']).toBeDefined();
    expect(document.paths['/auth/token'].options.responses['405'].headers.Allow).toBeDefined();
  });

  it('describes the data routes at the base path and at any depth, for all seven methods', () => {
    for (const path of ['/', '/{path}']) {
      const item = document.paths[path];
      expect(Object.keys(item).filter((key) => METHODS.includes(key)).sort()).toEqual(['delete', 'get', 'head', 'options', 'patch', 'post', 'put']);
      for (const method of ['get', 'head', 'delete', 'options', 'post', 'put', 'patch']) {
        const responses = item[method].responses;
        for (const status of ['2XX', '400', '401', '404', '408', '429', '500', '502', '503', '504', 'default']) {
          expect(responses[status], `${method} ${path} ${status}`).toBeDefined();
        }
        expect(item[method].security).toEqual([{ bearerAuth: [] }]);
        expect(Boolean(responses['413']), `${method} ${path} 413`).toBe(['delete', 'options', 'post', 'put', 'patch'].includes(method));
        for (const name of ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
          expect(responses['429'].headers[name], `${method} ${path} 429 ${name}`).toBeDefined();
        }
        expect(responses['401'].headers['WWW-Authenticate']).toBeDefined();
        // HEAD answers carry no body.
        if (method === 'head') expect(Object.values(responses as Record<string, Doc>).some((response) => response.content)).toBe(false);
      }
      expect(item.options.responses['204']).toBeDefined();
    }
    expect(document.components.parameters.DataPath.schema).toEqual(DATA_PATH_SCHEMA);
  });

  describe('the `path` parameter says exactly what the server forwards (Schemathesis found it did not)', () => {
    // A real JSON Schema validator (unicode patterns, as tools read them) over the parameter's schema.
    const valid = new Ajv2020({ strict: true }).compile(DATA_PATH_SCHEMA);
    // OpenAPI's simple style, as clients and Schemathesis send a path parameter: everything but unreserved
    // characters percent-encoded (UTF-8), so a slash in the value becomes %2F.
    const encode = (value: string) => encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    const forwarded = (rawPath: string): boolean => {
      try {
        engineTarget(`${BASE_PATH}/${rawPath}?company_id=acme`, '');
        return true;
      } catch (error) {
        expect((error as { code?: string }).code).toBe('invalid_request');
        return false;
      }
    };
    const wellFormed = (value: string) => {
      try {
        encodeURIComponent(value);
        return true;
      } catch {
        return false;
      }
    };
    // What the server decides on, mixed with anything at all.
    const piece = fc.oneof(
      fc.constantFrom('.', '..', '%2e', '%2E', ';', '%3b', '%3B', 'x=1', '/', '\\', '%', '%2f', '%5c', '%00', '?', '#', '\u0000', '\u001f', '\u007f', '\u0080', '\u009b', 'é', '💡', ' ', 'a'),
      fc.string({ unit: 'binary', maxLength: 4 }),
    );
    // Not empty: an empty path is the base path, the other operation (`/`).
    const value = fc
      .array(piece, { minLength: 1, maxLength: 6 })
      .map((pieces) => pieces.join(''))
      .filter((v) => v !== '' && wellFormed(v));

    it('is valid for a value exactly when the server forwards it, sent as clients send a path parameter', () => {
      for (const ok of ['prices', 'a.b', '...', '.well-known', '..x', 'é', 'a;b', '%2e%2e.', 'a b?#%']) expect(valid(ok), ok).toBe(true);
      for (const bad of ['', '.', '..', '%2e', '%2E%2e', '..;x', '.;', '%2e%2e%3Bjsessionid=1', 'a/b', 'a\\b', 'a\u0000b', '\u001e', '\u001b[2J', '\u007f']) {
        expect(valid(bad), JSON.stringify(bad)).toBe(false);
      }
      fc.assert(
        fc.property(value, (v) => {
          expect(valid(v), JSON.stringify(v)).toBe(forwarded(encode(v)));
        }),
        { numRuns: 5_000 },
      );
    });

    it('deeper resources: valid segments joined by plain slashes are forwarded, an escaped slash is refused', () => {
      fc.assert(
        fc.property(fc.array(value.filter((v) => valid(v)), { minLength: 2, maxLength: 4 }), (segments) => {
          expect(forwarded(segments.map(encode).join('/'))).toBe(true);
          expect(forwarded(segments.map(encode).join('%2F'))).toBe(false);
        }),
        { numRuns: 1_000 },
      );
      const description = document.components.parameters.DataPath.description as string;
      expect(description).toContain('(`%2F`) is not a separator: 400');
      expect(description).not.toContain('forwarded escaped');
    });

    it('is plain enough for generators: no lookaround or backreference, which negative generation cannot invert', () => {
      for (const pattern of [DATA_PATH_SCHEMA.pattern, DATA_PATH_SCHEMA.not.pattern]) expect(pattern).not.toMatch(/\(\?[=!<]|\\[1-9]/);
    });
  });

  it('gives company_id the documented rule (1-128 visible ASCII), the same as the domain', () => {
    const schema = document.components.schemas.CompanyId;
    expect(schema).toMatchObject({ type: 'string', minLength: 1, maxLength: 128, pattern: COMPANY_ID_PATTERN });
    const pattern = new RegExp(schema.pattern as string, 'u');
    for (const value of ['a', '!', '~', 'company-42', 'x'.repeat(128)]) expect(pattern.test(value), value).toBe(true);
    for (const value of ['', ' ', 'a b', 'x'.repeat(129), 'é', '\u007f', 'a\tb']) expect(pattern.test(value), JSON.stringify(value)).toBe(false);
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'grapheme-ascii', maxLength: 140 }), fc.string({ unit: 'binary', maxLength: 20 })), (value) => {
        expect(pattern.test(value)).toBe(isValidCompanyId(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('has an error envelope whose code enum is exactly the codes the server answers with, with their statuses', () => {
    const codes = document.components.schemas.ErrorCode;
    expect(codes.enum).toEqual(API_ERROR_CODES);
    for (const code of ['invalid_request', 'invalid_credentials', 'unauthorized', 'not_found', 'method_not_allowed', 'request_timeout',
      'payload_too_large', 'unsupported_media_type', 'rate_limited', 'internal_error', 'bad_gateway', 'upstream_unavailable',
      'database_unavailable', 'signing_key_unavailable', 'upstream_timeout'] as ErrorCode[]) {
      expect(codes.enum, code).toContain(code);
      expect(codes['x-status'][code]).toBe(statusOf(code));
    }
    // Codes only the CLI uses are not in it.
    for (const code of ['invalid_argument', 'partner_not_found', 'partner_exists', 'cancelled']) expect(codes.enum).not.toContain(code);
    const error = document.components.schemas.ErrorEnvelope.properties.error;
    expect(error.required).toEqual(['code', 'message', 'request_id']);
    expect(error.properties.code).toEqual({ $ref: '#/components/schemas/ErrorCode' });
    // Every status an error response is described with is one of its codes' statuses, or the engine's own.
    const statuses = new Set(API_ERROR_CODES.map((code) => String(statusOf(code))));
    for (const { path, method, operation } of ops) {
      for (const status of Object.keys(operation.responses).filter((key) => /^[45]\d\d$/.test(key))) {
        expect(statuses.has(status), `${method} ${path} ${status}`).toBe(true);
      }
    }
  });
});
