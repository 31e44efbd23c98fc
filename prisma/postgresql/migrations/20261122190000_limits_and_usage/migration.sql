-- CreateTable
CREATE TABLE "partner_limits" (
    "partner_id" TEXT NOT NULL,
    "rate_count" INTEGER,
    "rate_period_seconds" INTEGER,
    "burst" INTEGER,
    "daily_quota" INTEGER,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "partner_limits_pkey" PRIMARY KEY ("partner_id")
);

-- CreateTable
CREATE TABLE "usage_hours" (
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "period_start" TIMESTAMP(3) NOT NULL,
    "accepted" INTEGER NOT NULL DEFAULT 0,
    "client_errors" INTEGER NOT NULL DEFAULT 0,
    "server_errors" INTEGER NOT NULL DEFAULT 0,
    "rate_limited" INTEGER NOT NULL DEFAULT 0,
    "engine_ms_sum" DOUBLE PRECISION NOT NULL DEFAULT 0,

    CONSTRAINT "usage_hours_pkey" PRIMARY KEY ("partner_id","company_id","period_start")
);

-- CreateIndex
CREATE INDEX "usage_hours_period_start_idx" ON "usage_hours"("period_start");
