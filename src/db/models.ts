// The tables' columns as the Prisma schema declares them, from the client types the build generates
// (scripts/prisma-types.mjs). Type imports only: nothing loads the Prisma client at run time. The
// repositories declare their rows from these, so a column renamed, retyped or removed in the schema fails
// the typecheck until the SQL follows.
import type {
  AuditEventModel,
  ExposureHourModel,
  GateDecisionModel,
  GateDecisionUnrecordedModel,
  KeyPairModel,
  LeakReportModel,
  PartnerLimitModel,
  PartnerModel,
  PartnerNetworkModel,
  ServeInstanceModel,
  UsageHourModel,
  WebhookDeliveryModel,
  WebhookEndpointModel,
  WebhookEventModel,
} from './generated/types/models.js';

export interface Models {
  AuditEvent: AuditEventModel;
  ExposureHour: ExposureHourModel;
  GateDecision: GateDecisionModel;
  GateDecisionUnrecorded: GateDecisionUnrecordedModel;
  KeyPair: KeyPairModel;
  LeakReport: LeakReportModel;
  Partner: PartnerModel;
  PartnerLimit: PartnerLimitModel;
  PartnerNetwork: PartnerNetworkModel;
  ServeInstance: ServeInstanceModel;
  UsageHour: UsageHourModel;
  WebhookDelivery: WebhookDeliveryModel;
  WebhookEndpoint: WebhookEndpointModel;
  WebhookEvent: WebhookEventModel;
}

/** BIGINT columns come back as numbers: each holds milliseconds or counts, well below 2^53. */
type AsRead<T> = T extends bigint ? number : T;

/** The named columns of a model (every column when none are named), as the repositories return them. */
export type Columns<Model extends keyof Models, Name extends keyof Models[Model] = keyof Models[Model]> = {
  [K in Name]: AsRead<Models[Model][K]>;
};

/** A column the repository returns in another form than stored (parsed, or known not null): its name is still the schema's. */
export type Column<Model extends keyof Models, Name extends keyof Models[Model], As> = { [K in Name]: As };
