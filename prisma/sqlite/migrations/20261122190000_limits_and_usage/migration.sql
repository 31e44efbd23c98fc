-- CreateTable
CREATE TABLE "partner_limits" (
    "partner_id" TEXT NOT NULL PRIMARY KEY,
    "rate_count" INTEGER,
    "rate_period_seconds" INTEGER,
    "burst" INTEGER,
    "daily_quota" INTEGER,
    "updated_at" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "usage_hours" (
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "period_start" DATETIME NOT NULL,
    "accepted" INTEGER NOT NULL DEFAULT 0,
    "client_errors" INTEGER NOT NULL DEFAULT 0,
    "server_errors" INTEGER NOT NULL DEFAULT 0,
    "rate_limited" INTEGER NOT NULL DEFAULT 0,
    "engine_ms_sum" REAL NOT NULL DEFAULT 0,

    PRIMARY KEY ("partner_id", "company_id", "period_start")
);

-- CreateIndex
CREATE INDEX "usage_hours_period_start_idx" ON "usage_hours"("period_start");
