-- AlterTable
ALTER TABLE "serve_instances" ADD COLUMN "stale_budget_ms" INTEGER NOT NULL DEFAULT 0;
