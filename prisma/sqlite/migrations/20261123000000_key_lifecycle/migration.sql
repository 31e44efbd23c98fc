-- AlterTable
ALTER TABLE "partners" ADD COLUMN "tokens_revoked_before" BIGINT;

-- AlterTable
ALTER TABLE "key_pairs" ADD COLUMN "expires_at" DATETIME;
ALTER TABLE "key_pairs" ADD COLUMN "last_refused_at" DATETIME;
