-- CreateTable
CREATE TABLE "gate_decisions" (
    "request_id" TEXT NOT NULL PRIMARY KEY,
    "at" DATETIME NOT NULL,
    "instance_id" TEXT NOT NULL,
    "route" TEXT NOT NULL,
    "partner_id" TEXT,
    "key_pair_id" TEXT,
    "token_id" TEXT,
    "company_id" TEXT,
    "client_address" TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "reason" TEXT NOT NULL
);

-- CreateTable
CREATE TABLE "gate_decisions_unrecorded" (
    "minute" DATETIME NOT NULL,
    "instance_id" TEXT NOT NULL,
    "key_kind" TEXT NOT NULL,
    "key_value" TEXT NOT NULL,
    "refusals" INTEGER NOT NULL DEFAULT 0,

    PRIMARY KEY ("minute", "instance_id", "key_kind", "key_value")
);

-- CreateTable
CREATE TABLE "exposure_hours" (
    "key_pair_id" TEXT NOT NULL,
    "token_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "client_address" TEXT NOT NULL,
    "period_start" DATETIME NOT NULL,
    "partner_id" TEXT NOT NULL,
    "accepted" INTEGER NOT NULL DEFAULT 0,
    "client_errors" INTEGER NOT NULL DEFAULT 0,
    "server_errors" INTEGER NOT NULL DEFAULT 0,
    "first_at" DATETIME NOT NULL,
    "last_at" DATETIME NOT NULL,

    PRIMARY KEY ("key_pair_id", "company_id", "client_address", "token_id", "period_start")
);

-- CreateIndex
CREATE INDEX "gate_decisions_at_idx" ON "gate_decisions"("at");

-- CreateIndex
CREATE INDEX "gate_decisions_partner_id_at_idx" ON "gate_decisions"("partner_id", "at");

-- CreateIndex
CREATE INDEX "gate_decisions_key_pair_id_at_idx" ON "gate_decisions"("key_pair_id", "at");

-- CreateIndex
CREATE INDEX "gate_decisions_token_id_idx" ON "gate_decisions"("token_id");

-- CreateIndex
CREATE INDEX "exposure_hours_token_id_idx" ON "exposure_hours"("token_id");

-- CreateIndex
CREATE INDEX "exposure_hours_partner_id_period_start_idx" ON "exposure_hours"("partner_id", "period_start");

-- CreateIndex
CREATE INDEX "exposure_hours_period_start_idx" ON "exposure_hours"("period_start");
