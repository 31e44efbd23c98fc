-- CreateTable
CREATE TABLE "partners" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "key_pairs" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "partner_id" TEXT NOT NULL,
    "access_key" TEXT NOT NULL,
    "secret_hash" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "superseded_at" DATETIME,
    "revoked_at" DATETIME,
    "last_used_at" DATETIME,
    CONSTRAINT "key_pairs_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "company_mappings" (
    "partner_id" TEXT NOT NULL,
    "company_id" TEXT NOT NULL,
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,

    PRIMARY KEY ("partner_id", "company_id"),
    CONSTRAINT "company_mappings_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "audit_events" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "actor" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "partner_id" TEXT,
    "details" TEXT NOT NULL DEFAULT '{}'
);

-- CreateTable
CREATE TABLE "revision" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "value" INTEGER NOT NULL DEFAULT 0
);

-- CreateIndex
CREATE UNIQUE INDEX "partners_name_key" ON "partners"("name");

-- CreateIndex
CREATE INDEX "partners_status_id_idx" ON "partners"("status", "id");

-- CreateIndex
CREATE UNIQUE INDEX "key_pairs_access_key_key" ON "key_pairs"("access_key");

-- CreateIndex
CREATE INDEX "key_pairs_partner_id_status_idx" ON "key_pairs"("partner_id", "status");

-- CreateIndex
CREATE INDEX "company_mappings_company_id_idx" ON "company_mappings"("company_id");

-- CreateIndex
CREATE INDEX "audit_events_partner_id_id_idx" ON "audit_events"("partner_id", "id");

-- At most one active key pair per partner, enforced by the database (the Prisma schema cannot express a
-- partial index, so it lives only here, and test/db/migrations.test.ts knows about it).
CREATE UNIQUE INDEX "key_pairs_one_active_per_partner" ON "key_pairs"("partner_id") WHERE "status" = 'active';

-- The single revision row that every mutating transaction bumps.
INSERT INTO "revision" ("id", "value") VALUES (1, 0);
