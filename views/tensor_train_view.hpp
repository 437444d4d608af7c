// Tensor-Train candidates for the embedding (METHODS 5): for each factorisation
// of d, the reconstruction error against the compression ratio as eps varies
// (one series per shape), and the energy model for the selected candidate:
// original table vs TT vs the SVD of equal size, re-weighed live by the memory
// and arithmetic weights nu and tau. Numbers come from the engine; the view only
// weighs the given counts.
#pragma once

#include <QPointF>
#include <QString>
#include <QVector>

#include "plot_view.hpp"

class QCPAxisRect;
class QCPBars;
class QCPCurve;
class QCPItemStraightLine;
class QDoubleSpinBox;
class QLabel;

namespace embedlab::views {

struct TensorTrainCandidate {
    QString shape; // "8x8x12"
    QString ranks; // "1,4,4,1"
    double eps = 0, ratio = 0, relative_error = 0, mean_cosine = 0;
    int svd_rank = 0;                                          // SVD rank with about the TT's parameters
    double energy_original = 0, energy_tt = 0, energy_svd = 0; // nu + tau terms at nu 5, tau 1
    // The energy model's counts (METHODS 5), so the view can re-weigh them:
    // energy = nu * accesses + tau * operations. All zero: only energy_* is known.
    double accesses_original = 0, accesses_tt = 0, accesses_svd = 0;
    double operations_original = 0, operations_tt = 0, operations_svd = 0;
};

// Energies of the original table, the TT and the equal-size SVD at weights nu, tau.
struct TensorTrainEnergy {
    double original = 0, tt = 0, svd = 0;
};
TensorTrainEnergy weighedEnergy(const TensorTrainCandidate& c, double nu, double tau);

struct TensorTrainData {
    QString label;
    int vocab = 0, dim = 0;
    int fittedRows = 0; // < vocab: the candidates are estimates from this many evenly spaced rows
    QVector<TensorTrainCandidate> candidates; // grouped by shape, eps ascending within a shape
    int chosen = -1;                          // the candidate the method panel runs (shown first; -1: none)
};

class TensorTrainView : public DataPlotView<TensorTrainData> {
    Q_OBJECT
public:
    explicit TensorTrainView(QWidget* parent = nullptr);
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    int selected() const { return selected_; }       // candidate index, -1: none
    QCPBars* energyBars() const { return bars_; }    // energy / original energy at nu, tau
    QDoubleSpinBox* nuSpin() const { return nu_; }   // memory-access weight, default 5
    QDoubleSpinBox* tauSpin() const { return tau_; } // operation weight, default 1
    double nu() const;
    double tau() const;
    QString summary() const;
    // Said (read-out and plot) while the candidates are computed; setData ends it.
    void setComputing(const QString& what);
    // Every candidate (shape, ranks, eps, the plotted ratio and error, ...) and the
    // energy bars at the shown weights.
    QVector<DataTable> dataTables() const override;

public slots:
    void setSelected(int candidate);
    void setWeights(double nu, double tau);

signals:
    void candidateSelected(int candidate);

private:
    void draw() override;
    QCPAxisRect* energy_rect_;
    QCPBars* bars_;
    QCPCurve* ring_;
    QCPCurve* over_one_;       // candidates with ratio > 1, crossed out
    QCPItemStraightLine* one_; // ratio 1
    QDoubleSpinBox* nu_;
    QDoubleSpinBox* tau_;
    QLabel* stats_;
    QVector<QCPCurve*> series_;
    QVector<QVector<int>> series_rows_;
    int selected_ = -1;
    QString computing_; // setComputing's text until setData
};

} // namespace embedlab::views
