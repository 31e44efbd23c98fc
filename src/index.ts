// The package's public surface is the partner client; the CLI is the `partnerctl` binary.
export * from './client/index.js';
