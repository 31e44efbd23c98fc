-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "unlisted_refused_at" DATETIME;
ALTER TABLE "key_pairs" ADD COLUMN "unlisted_refused_address" TEXT;

-- CreateTable
CREATE TABLE "partner_networks" (
    "partner_id" TEXT NOT NULL PRIMARY KEY,
    "allow_from" TEXT NOT NULL,
    "updated_at" DATETIME NOT NULL
);
