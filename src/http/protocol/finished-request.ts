/** One answered request, for whatever counts requests once they are finished: the request log, usage, metrics. */
export interface FinishedRequest {
  requestId: string;
  /** The partner of a data request whose token was verified; null for any other request. */
  partnerId: string | null;
  /** The company a data request was authorised for. */
  companyId: string | null;
  method: string;
  url: string;
  status: number;
  durationMs: number;
  /** How long the engine took to answer; 0 when it was not asked or did not answer. */
  engineMs: number;
  /** A token exchange (accepted or refused): the pair its access key named, the partner it minted for, the client. */
  exchange?: { keyPairId: string | null; partnerId: string | null; client: string; userAgent: string | undefined };
  /** Why a 5xx was answered (the client sees a fixed message): for the log. */
  failure?: unknown;
}
