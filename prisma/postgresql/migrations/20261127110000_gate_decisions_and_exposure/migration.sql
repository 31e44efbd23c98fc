-- CreateTable
CREATE TABLE "gate_decisions" (
    "request_id" TEXT NOT NULL,
    "at" TIMESTAMP(3) NOT NULL,
    "instance_id" TEXT NOT NULL,
    "route" TEXT NOT NULL,
    "partner_id" TEXT,
    "key_pair_id" TEXT,
    "token_id" TEXT,
    "company_id" TEXT,
    "client_address" TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "reason" TEXT NOT NULL,

    CONSTRAINT "gate_decisions_pkey" PRIMARY KEY ("request_id")
);

-- CreateTable
CREATE TABLE "gate_decisions_unrecorded" (
    "minute" TIMESTAMP(3) NOT NULL,
    "instance_id" TEXT NOT NULL,
    "key_kind" TEXT NOT NULL,
    "key_value" TEXT NOT NULL,
    "refusals" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "gate_decisions_unrecorded_pkey" PRIMARY KEY ("minute","instance_id","key_kind","key_value")
);

-- CreateTable
CREATE TABLE "exposure_hours" (
    "key_pair_id" TEXT NOT NULL,
    "token_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "client_address" TEXT NOT NULL,
    "period_start" TIMESTAMP(3) NOT NULL,
    "partner_id" TEXT NOT NULL,
    "accepted" INTEGER NOT NULL DEFAULT 0,
    "client_errors" INTEGER NOT NULL DEFAULT 0,
    "server_errors" INTEGER NOT NULL DEFAULT 0,
    "first_at" TIMESTAMP(3) NOT NULL,
    "last_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "exposure_hours_pkey" PRIMARY KEY ("key_pair_id","company_id","client_address","token_id","period_start")
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

